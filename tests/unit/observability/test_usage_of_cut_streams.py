"""What a turn bills when the provider never reported usage (interrupt, budget cut, broken stream).

Output: the text deltas received. Input: what the provider said when the stream started (Anthropic's
``message_start``, carried by ``ModelStart.input_tokens``), else an estimate of the request (about
four characters per token), but only if the provider started answering. Either way it is marked
estimated; a request refused before any answer costs nothing.
"""

from __future__ import annotations

import asyncio

from agentvm.agent.context import estimate_request_tokens
from agentvm.agent.loop import complete, run_turn
from agentvm.errors import ProviderUnavailable
from agentvm.llm import ChatTurn, ModelRequest, ModelStart, ModelStop, TextDelta
from agentvm.runtime import SystemClock

REQUEST = ModelRequest(
    model="m", messages=(ChatTurn("user", "What is the capital of France?"),), system="Be brief."
)


class _Model:
    def __init__(self, *, start_tokens: int | None, stop: bool, fail_first: bool = False) -> None:
        self.start_tokens = start_tokens
        self.stop = stop
        self.fail_first = fail_first

    async def stream(self, request):
        if self.fail_first:
            raise ProviderUnavailable("503")
        yield ModelStart(message_id="msg_1", model="m", input_tokens=self.start_tokens)
        for word in ("Paris", " is", " the", " capital"):
            yield TextDelta(word)
        if self.stop:
            yield ModelStop("end_turn", input_tokens=20, output_tokens=4)
        else:
            raise ProviderUnavailable("cut")


class _Quiet:
    """Loop hooks that only hand out the model: nothing is stored or sent."""

    def __init__(self, model):
        self.model = model

    def on_start(self, message_id, model):
        pass

    def on_text(self, text):
        pass

    def on_tool_start(self, call_id, name):
        pass

    async def on_tool_call(self, step, call):
        pass

    async def client_for_step(self, index):
        return self.model

    async def step_finished(self, step):
        pass

    async def tools_planned(self, step):
        pass

    async def tool_finished(self, step, run):
        pass


async def _run(model):
    return await complete(model, REQUEST, clock=SystemClock())


async def test_provider_reported_usage_is_used_as_is():
    outcome = await _run(_Model(start_tokens=18, stop=True))
    assert (outcome.input_tokens, outcome.output_tokens, outcome.usage_estimated) == (20, 4, False)


async def test_a_cut_stream_bills_the_input_reported_at_the_start_and_the_deltas_received():
    outcome = await _run(_Model(start_tokens=18, stop=False))
    assert (outcome.input_tokens, outcome.output_tokens, outcome.usage_estimated) == (18, 4, True)


async def test_without_input_reported_at_the_start_the_input_is_estimated():
    outcome = await _run(_Model(start_tokens=None, stop=False))
    assert outcome.input_tokens == estimate_request_tokens(REQUEST) == 3 + 8
    assert (outcome.output_tokens, outcome.usage_estimated) == (4, True)


async def test_a_request_refused_before_any_answer_costs_nothing():
    outcome = await _run(_Model(start_tokens=None, stop=False, fail_first=True))
    assert (outcome.input_tokens, outcome.output_tokens, outcome.usage_estimated) == (0, 0, False)


async def test_an_interrupted_stream_bills_what_was_consumed():
    class Slow(_Model):
        async def stream(self, request):
            yield ModelStart(message_id="msg_1", model="m", input_tokens=18)
            for i in range(100):
                await asyncio.sleep(0.005)
                yield TextDelta(f" w{i}")

    cancelled = asyncio.Event()
    turn = asyncio.create_task(
        run_turn(
            REQUEST,
            _Quiet(Slow(start_tokens=18, stop=False)),
            toolbox=None,
            cancelled=cancelled,
            clock=SystemClock(),
        )
    )
    await asyncio.sleep(0.05)
    cancelled.set()
    outcome = await turn
    assert outcome.interrupted and outcome.usage_estimated
    assert outcome.input_tokens == 18 and 0 < outcome.output_tokens == len(outcome.text.split()) < 100
