"""The fake provider's configuration, injected faults and counters, shared across threads."""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentvm.fakellm.prompt_cache import PromptCache

if TYPE_CHECKING:
    from collections.abc import Iterable

_LOREM_TEXT = (
    "Lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
    "et dolore magna aliqua Ut enim ad minim veniam quis nostrud exercitation ullamco laboris nisi"
)
_LOREM = _LOREM_TEXT.split()

FAULT_KINDS = ("429", "500", "overloaded", "cut", "stream_error", "hang")


def reply_tokens(count: int) -> list[str]:
    """The deterministic reply, one token per word, each but the first with its leading space."""
    return [("" if i == 0 else " ") + _LOREM[i % len(_LOREM)] for i in range(count)]


def count_words(value: object) -> int:
    """Rough input size of a request body part: words in every string (or text/content field)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(count_words(item) for item in value)
    if isinstance(value, dict):
        return count_words(value.get("text")) + count_words(value.get("content"))
    return 0


@dataclass(frozen=True, slots=True)
class FakeLLMConfig:
    """How the fake model behaves. ``input_tokens=None`` reports a rough word count of the request.

    ``cache_read_tokens`` / ``cache_write_tokens``: how many of the input tokens to report as read
    from / written to the prompt cache (capped at the input tokens), in each provider's own fields:
    Anthropic ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` (beside an
    ``input_tokens`` that then counts only the rest), OpenAI ``prompt_tokens_details.cached_tokens``
    (inside ``prompt_tokens``; OpenAI reports no cache writes). Left at 0, the fake prices its own
    prompt cache (``fakellm/prompt_cache.py``) unless ``prompt_cache`` is false;
    ``cache_min_tokens`` is the shortest prefix an Anthropic breakpoint caches.
    """

    ttft_ms: float = 500
    tokens_per_second: float = 35
    reply_tokens: int = 200
    input_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    prompt_cache: bool = True
    cache_min_tokens: int = 1024
    stamp_tokens: bool = False  # each token is " @<emit time, epoch seconds>" (latency benchmarks)
    # the one key the embedding endpoints accept (OpenAI bearer key, Bedrock access key id); None: any
    embeddings_api_key: str | None = None

    def updated(self, fields: Mapping[str, Any]) -> FakeLLMConfig:
        """A copy with ``fields`` changed; unknown names or bad values raise ValueError."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"unknown config fields: {', '.join(unknown)}")
        try:
            values = {name: _coerce(name, value) for name, value in fields.items()}
        except (TypeError, ValueError):
            raise ValueError(f"bad config values: {dict(fields)!r}") from None
        new = dataclasses.replace(self, **values)
        if new.ttft_ms < 0 or new.tokens_per_second <= 0 or new.reply_tokens < 0:
            raise ValueError("need ttft_ms >= 0, tokens_per_second > 0, reply_tokens >= 0")
        if new.input_tokens is not None and new.input_tokens < 0:
            raise ValueError("input_tokens must be >= 0")
        if new.cache_read_tokens < 0 or new.cache_write_tokens < 0:
            raise ValueError("cache_read_tokens and cache_write_tokens must be >= 0")
        return new


def _coerce(name: str, value: Any) -> Any:
    """Config values arrive as JSON: accept "20" for 20, keep None for an automatic input count."""
    if name == "input_tokens":
        return None if value is None else int(value)
    if name == "embeddings_api_key":
        return None if value is None else str(value)
    if name in ("stamp_tokens", "prompt_cache"):
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
    integers = ("reply_tokens", "cache_read_tokens", "cache_write_tokens", "cache_min_tokens")
    return int(value) if name in integers else float(value)


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected failure, consumed by the next model request.

    ``429`` (with ``retry_after`` seconds), ``500``, ``overloaded`` (Anthropic 529, OpenAI 503),
    ``cut`` (drop the connection after ``after_tokens`` tokens, without the terminal events),
    ``stream_error`` (an error event in the stream after ``after_tokens`` tokens) and ``hang``
    (say nothing for ``duration`` seconds: before the response headers, or with ``after_tokens``
    mid-stream after that many tokens; then answer normally unless the client gave up).
    """

    kind: str
    retry_after: float = 1.0
    after_tokens: int = 0
    duration: float = 60.0

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Fault:
        kind = str(raw.get("kind", ""))
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; use one of {', '.join(FAULT_KINDS)}")
        return cls(
            kind=kind,
            retry_after=float(raw.get("retry_after", 1.0)),
            after_tokens=max(int(raw.get("after_tokens", 0)), 0),
            duration=max(float(raw.get("duration", 60.0)), 0.0),
        )


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted answer (``POST /_fake/script``): optional text, then tool calls.

    ``raw_arguments`` replaces the first call's input JSON verbatim (to send invalid JSON).
    """

    text: str = ""
    tool_calls: tuple[dict[str, Any], ...] = ()
    raw_arguments: str | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> ScriptedReply:
        if not isinstance(raw, Mapping):
            raise ValueError("each scripted reply must be an object")
        text = raw.get("text") or ""
        calls = raw.get("tool_calls") or []
        if not isinstance(text, str) or not isinstance(calls, list):
            raise ValueError("'text' must be a string and 'tool_calls' a list")
        parsed = []
        for call in calls:
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                raise ValueError("each tool call needs a 'name'")
            arguments = call.get("input", {})
            if not isinstance(arguments, dict):
                raise ValueError("a tool call's 'input' must be an object")
            parsed.append({"name": call["name"], "input": arguments, "id": call.get("id")})
        raw_arguments = raw.get("raw_arguments")
        if raw_arguments is not None and not isinstance(raw_arguments, str):
            raise ValueError("'raw_arguments' must be a string")
        return cls(text=text, tool_calls=tuple(parsed), raw_arguments=raw_arguments)


MAX_RECORDED_REQUESTS = 500


class FakeLLMState:
    """Config, pending faults and stats. Locked: the server thread and test code both touch it."""

    def __init__(self, config: FakeLLMConfig | None = None) -> None:
        self._lock = threading.Lock()
        self._initial = config or FakeLLMConfig()
        self._config = self._initial
        self._faults: deque[Fault] = deque()
        self._script: deque[ScriptedReply] = deque()
        self._requests: deque[dict[str, Any]] = deque(maxlen=MAX_RECORDED_REQUESTS)
        self._counts = dict.fromkeys(
            (
                "requests",
                "tokens_emitted",
                "disconnects",
                "completed",
                "cache_read_tokens",
                "cache_write_tokens",
            ),
            0,
        )
        self.prompt_cache = PromptCache()

    @property
    def config(self) -> FakeLLMConfig:
        return self._config

    def configure(self, fields: Mapping[str, Any]) -> FakeLLMConfig:
        with self._lock:
            self._config = self._config.updated(fields)
            return self._config

    def add_faults(self, faults: Iterable[Mapping[str, Any] | Fault]) -> int:
        """Queue faults; returns how many are pending."""
        parsed = [f if isinstance(f, Fault) else Fault.parse(f) for f in faults]
        with self._lock:
            self._faults.extend(parsed)
            return len(self._faults)

    def add_script(self, replies: Iterable[Mapping[str, Any]]) -> int:
        """Queue scripted replies (each answers one model request); returns how many are pending."""
        parsed = [ScriptedReply.parse(r) for r in replies]
        with self._lock:
            self._script.extend(parsed)
            return len(self._script)

    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the model requests received, oldest first (the last 500)."""
        with self._lock:
            return list(self._requests)

    def reset(self) -> None:
        """Back to the initial config, no faults, no script, no recorded requests, zero counters."""
        with self._lock:
            self._config = self._initial
            self._faults.clear()
            self._script.clear()
            self._requests.clear()
            for name in self._counts:
                self._counts[name] = 0
        self.prompt_cache.clear()

    def begin_request(
        self, body: dict[str, Any] | None = None
    ) -> tuple[FakeLLMConfig, Fault | None, ScriptedReply | None]:
        """Count (and record) a model request; take its config, the next fault and scripted reply."""
        with self._lock:
            self._counts["requests"] += 1
            if body is not None:
                self._requests.append(body)
            fault = self._faults.popleft() if self._faults else None
            scripted = self._script.popleft() if self._script and fault is None else None
            return self._config, fault, scripted

    def begin_embedding(self, body: dict[str, Any]) -> Fault | None:
        """Count (and record) an embeddings request and take the next fault; never a scripted
        reply, which answers the next chat request."""
        with self._lock:
            self._counts["requests"] += 1
            self._requests.append(body)
            return self._faults.popleft() if self._faults else None

    def count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[name] += amount

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


__all__ = [
    "FAULT_KINDS",
    "FakeLLMConfig",
    "FakeLLMState",
    "Fault",
    "ScriptedReply",
    "count_words",
    "reply_tokens",
]
