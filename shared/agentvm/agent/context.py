"""What a turn sends the model: the image's system prompt, the session's compaction summary (as an
addendum to it), and the messages the summary does not cover, read as one bounded window.

Token counts here are estimates (about four characters per token): cheap, provider-neutral, and
only used to decide when to summarise and to bill a stream the provider cut before reporting usage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentvm.agent.history import chat_turns, tool_result_of
from agentvm.agent.window import diet_cut, prefix_break, read_bounds
from agentvm.llm import ModelRequest
from agentvm.messages import AssistantMessage, ToolCallMessage, ToolResultMessage, UserMessage, text_of

if TYPE_CHECKING:
    from agentvm.agent.diet import ContextDiet
    from agentvm.agent.window import PrefixBreak
    from agentvm.llm import ToolSpec
    from agentvm.messages import Message
    from agentvm.ports import SeqMessage, Store
    from agentvm.records import SessionSummary

CHARS_PER_TOKEN = 4
# A tool result's image, as the providers count it (Anthropic: width x height / 750, ~1,600 for a
# 1,092 px square, the size it scales larger images down to): an upper estimate per media block.
MEDIA_TOKENS = 1_600
SUMMARY_HEADING = "Summary of the earlier conversation (those messages are not repeated below):"


def estimate_tokens(text: str | None) -> int:
    """About four characters per token, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN) if text else 0


def estimate_request_tokens(request: ModelRequest) -> int:
    """The input tokens of a model request, estimated: system prompt, messages, tool exchanges."""
    total = estimate_tokens(request.system)
    for turn in request.messages:
        total += estimate_tokens(turn.text)
        total += sum(estimate_tokens(json.dumps(call.input)) + 8 for call in turn.tool_calls)
        total += sum(estimate_tokens(result.content) + 8 for result in turn.tool_results)
        total += sum(MEDIA_TOKENS * len(result.media) for result in turn.tool_results)
    return total


def model_text(message: Message) -> str:
    """The text of a message as the model sees it: user and assistant text, tool calls and results
    (as short lines); nothing of errors."""
    if isinstance(message, (UserMessage, AssistantMessage)):
        return text_of(message.content)
    if isinstance(message, ToolCallMessage):
        return f"[called {message.toolCall.name} {json.dumps(message.toolCall.input, ensure_ascii=False)}]"
    if isinstance(message, ToolResultMessage):
        if message.toolResult.output.type == "content":  # media as placeholders, never their bytes
            return f"[{message.toolResult.name} returned: {tool_result_of(message).content}]"
        value = message.toolResult.output.value
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return f"[{message.toolResult.name} returned: {shown}]"
    return ""


def system_prompt(image_prompt: str | None, summary: SessionSummary | None) -> str | None:
    """The image's system prompt, plus the session summary when there is one."""
    if summary is None or not summary.text:
        return image_prompt
    addendum = f"{SUMMARY_HEADING}\n{summary.text}"
    return f"{image_prompt}\n\n{addendum}" if image_prompt else addendum


@dataclass(frozen=True, slots=True)
class TurnContext:
    """A session as a turn reads it: its summary, and the messages after it (oldest first)."""

    summary: SessionSummary | None
    entries: tuple[SeqMessage, ...]
    window: int  # the history window (agent/window.py: a turn reads from window to window + step - 1)
    # What the context diet shows instead of some tool results, by message id (agent/diet.py)
    dieted: dict[str, Message] = field(default_factory=dict)
    # How this turn's prefix differs from the previous turn's (agent/window.py); None: it does not
    prefix_break: PrefixBreak | None = None

    @property
    def messages(self) -> list[Message]:
        return [entry.message for entry in self.entries]

    @property
    def shown(self) -> list[Message]:
        """The messages as the model sees them: the diet's stubs in place of what it trimmed."""
        return [self.dieted.get(entry.message.id, entry.message) for entry in self.entries]

    @property
    def after_seq(self) -> int:
        """The seq the summary covers up to (0: no summary)."""
        return self.summary.upToSeq if self.summary is not None else 0

    def estimated_tokens(self, image_prompt: str | None) -> int:
        """The context a turn would send now: system prompt, summary and unsummarised messages (as
        the context diet shows them)."""
        return estimate_tokens(system_prompt(image_prompt, self.summary)) + sum(
            estimate_tokens(model_text(m)) for m in self.shown
        )

    def request(
        self,
        *,
        model: str,
        image_prompt: str | None,
        up_to_user_id: str,
        max_tokens: int,
        tools: tuple[ToolSpec, ...] = (),
        prompt_caching: bool = False,
        cache_key: str | None = None,
    ) -> ModelRequest:
        return ModelRequest(
            model=model,
            messages=chat_turns(self.shown, up_to_user_id=up_to_user_id),
            system=system_prompt(image_prompt, self.summary),
            max_tokens=max_tokens,
            tools=tools,
            prompt_caching=prompt_caching,
            cache_key=cache_key,
            stable_system_chars=len(image_prompt) if image_prompt else None,
        )


async def load_context(
    store: Store,
    session_id: str,
    window: int,
    *,
    summarised: bool = True,
    through_seq: int | None = None,
    anchor_seq: int | None = None,
    step: int = 0,
    diet: ContextDiet | None = None,
) -> TurnContext:
    """Two bounded reads: the session's summary, then the window of messages after it.

    ``summarised=False`` (compaction off) skips the summary: the turn reads the plain window.
    ``through_seq``: only the messages up to this seq matter (a turn's first attempt: its user
    message's), so the messages are read eventually consistent first (half the price on DynamoDB),
    and read again strongly consistent if that read may have missed one: seqs have no gaps, so the
    read is whole when it holds ``through_seq`` and every seq from its oldest one up to it.
    ``anchor_seq`` (the seq of the user message the turn answers) and ``step`` > 0: the stepped
    window (``agent/window.py``), every message from its start on, the turn's own included;
    ``step=0`` or no anchor: the last ``window`` messages. ``diet``: the image's context diet
    (``agent/diet.py``), decided where the prefix breaks anyway (``agent.window.diet_cut``). With
    an anchor the context also says how its prefix differs from the previous turn's
    (``prefix_break``).
    """
    summary = await store.get_summary(session_id) if summarised else None
    after = summary.upToSeq if summary is not None else 0
    lower, limit = after, window
    if step > 0 and anchor_seq is not None:
        lower, limit = read_bounds(after, anchor_seq, window, step)
    entries: list[SeqMessage] | None = None
    if through_seq is not None:
        entries = await store.recent_messages_after(session_id, lower, limit, fresh=False)
        if not _whole_through(entries, lower, through_seq):
            entries = None
    if entries is None:
        entries = await store.recent_messages_after(session_id, lower, limit)
    return _viewed(tuple(entries), summary, window, anchor_seq, step, diet)


def _viewed(
    entries: tuple[SeqMessage, ...],
    summary: SessionSummary | None,
    window: int,
    anchor_seq: int | None,
    step: int,
    diet: ContextDiet | None,
) -> TurnContext:
    """The context as read, with the diet's stubs (decided where the prefix breaks anyway) and how
    its prefix differs from the previous turn's."""
    if anchor_seq is None:
        return TurnContext(summary=summary, entries=entries, window=window)
    after = summary.upToSeq if summary is not None else 0

    def dieted_at(cut: int) -> dict[str, Message]:
        return diet.trimmed(entries, cut) if diet is not None else {}

    broken = prefix_break(
        entries,
        summary,
        anchor=anchor_seq,
        window=window,
        step=step,
        elided=lambda cut: frozenset(dieted_at(cut)),
    )
    seen = summary.seenSeq if summary is not None else 0
    dieted = dieted_at(diet_cut(after, anchor_seq, window, step, seen))
    return TurnContext(summary=summary, entries=entries, window=window, dieted=dieted, prefix_break=broken)


def _whole_through(entries: list[SeqMessage], after: int, seq: int) -> bool:
    """Whether a read of the messages above ``after`` holds every one up to ``seq`` that a read of
    the same window would (a lagging read misses the newest: never a message in the middle)."""
    seqs = [e.seq for e in entries]
    if seq not in seqs:
        return False
    upto = seqs[: seqs.index(seq) + 1]
    return upto == list(range(upto[0], seq + 1))


__all__ = [
    "CHARS_PER_TOKEN",
    "SUMMARY_HEADING",
    "TurnContext",
    "estimate_request_tokens",
    "estimate_tokens",
    "load_context",
    "model_text",
    "system_prompt",
]
