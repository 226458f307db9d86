"""Running the fake provider: in a background thread for tests, or in the foreground for ``avm``."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from agentvm.fakellm.state import FakeLLMConfig, FakeLLMState

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Mapping
    from types import TracebackType

    from agentvm.fakellm.state import Fault

_START_TIMEOUT_S = 10.0


class _HideIntentionalCuts(logging.Filter):
    """uvicorn reports the ``cut`` fault (a response we end on purpose) as an application error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("ASGI callable returned without completing response")


def _quiet_uvicorn() -> None:
    uvicorn_error = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _HideIntentionalCuts) for f in uvicorn_error.filters):
        uvicorn_error.addFilter(_HideIntentionalCuts())


def _show_fake_events() -> None:
    """In the foreground, print the fake's own notes (faults, disconnects) next to uvicorn's lines."""
    fake_logger = logging.getLogger("agentvm.fakellm")
    if not fake_logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     fake-llm: %(message)s"))
        fake_logger.addHandler(handler)
        fake_logger.setLevel(logging.INFO)


class FakeLLMServer:
    """The fake provider on 127.0.0.1 and a free port, served by uvicorn in a daemon thread.

    ``with FakeLLMServer(FakeLLMConfig(ttft_ms=20)) as fake:`` then point Anthropic clients at
    ``fake.base_url`` and OpenAI clients at ``fake.openai_base_url``.
    """

    def __init__(
        self, config: FakeLLMConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.state = FakeLLMState(config)
        self._host = host
        self._port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.base_url = ""

    @property
    def openai_base_url(self) -> str:
        """The OpenAI SDK wants the ``/v1`` prefix in its base URL, Anthropic's SDK adds it itself."""
        return f"{self.base_url}/v1"

    def __enter__(self) -> FakeLLMServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        import uvicorn

        from agentvm.fakellm.app import create_app

        # Binding here (port 0 = any free port) tells us the port before uvicorn starts.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._socket = sock
        host, port = sock.getsockname()[:2]
        self.base_url = f"http://{host}:{port}"
        _quiet_uvicorn()
        config = uvicorn.Config(
            create_app(self.state),
            log_config=None,  # leave the host's logging alone
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,  # a stream a test left open must not hold up __exit__
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-llm", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake LLM server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def stats(self) -> dict[str, int]:
        """``{"requests", "tokens_emitted", "disconnects", "completed"}`` since the last reset."""
        return self.state.stats()

    def add_faults(self, faults: Iterable[Mapping[str, Any] | Fault]) -> int:
        """Queue faults, one consumed per model request, e.g. ``[{"kind": "429", "retry_after": 1}]``."""
        return self.state.add_faults(faults)

    def configure(self, **fields: Any) -> FakeLLMConfig:
        """Change config fields (``ttft_ms``, ``tokens_per_second``, ``reply_tokens``, ``input_tokens``,
        ``cache_read_tokens``, ``cache_write_tokens``)."""
        return self.state.configure(fields)

    def reset(self) -> None:
        """Initial config, no pending faults, zero stats."""
        self.state.reset()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``avm fake-llm``."""
    defaults = FakeLLMConfig()
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8090, help="port (default: %(default)s)")
    parser.add_argument(
        "--ttft-ms", type=float, default=defaults.ttft_ms, help="delay before the first token (ms)"
    )
    parser.add_argument(
        "--tokens-per-second", type=float, default=defaults.tokens_per_second, help="streaming speed"
    )
    parser.add_argument(
        "--reply-tokens", type=int, default=defaults.reply_tokens, help="tokens (words) per reply"
    )
    parser.add_argument(
        "--input-tokens", type=int, default=None, help="input tokens to report (default: count request words)"
    )
    parser.add_argument(
        "--cache-read-tokens", type=int, default=0, help="of the input, tokens to report as cache reads"
    )
    parser.add_argument(
        "--cache-write-tokens", type=int, default=0, help="of the input, tokens to report as cache writes"
    )
    parser.add_argument(
        "--no-prompt-cache",
        action="store_true",
        help="report no cache reads or writes (default: price the prompt cache as each provider does)",
    )
    parser.add_argument(
        "--cache-min-tokens",
        type=int,
        default=defaults.cache_min_tokens,
        help="shortest prefix an Anthropic breakpoint caches (default: %(default)s)",
    )
    parser.add_argument(
        "--stamp-tokens", action="store_true", help="send each token as its emit time (latency benchmarks)"
    )
    parser.add_argument(
        "--embeddings-api-key",
        default=None,
        help="the one key the embedding endpoints accept (OpenAI key, Bedrock access key id; default: any)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve the fake provider in the foreground until interrupted."""
    import uvicorn

    from agentvm.fakellm.app import create_app

    try:
        config = FakeLLMConfig().updated(
            {
                "ttft_ms": args.ttft_ms,
                "tokens_per_second": args.tokens_per_second,
                "reply_tokens": args.reply_tokens,
                "input_tokens": args.input_tokens,
                "cache_read_tokens": args.cache_read_tokens,
                "cache_write_tokens": args.cache_write_tokens,
                "stamp_tokens": args.stamp_tokens,
                "prompt_cache": not args.no_prompt_cache,
                "cache_min_tokens": args.cache_min_tokens,
                "embeddings_api_key": args.embeddings_api_key,
            }
        )
    except ValueError as exc:
        print(f"avm fake-llm: {exc}")
        return 2
    url = f"http://{args.host}:{args.port}"
    print(f"fake LLM provider on {url} (any API key is accepted)")
    print(f"  ANTHROPIC_BASE_URL={url}")
    print(f"  OPENAI_BASE_URL={url}/v1")
    print(f"  AWS_ENDPOINT_URL_BEDROCK_RUNTIME={url}")
    print(f"  controls: POST {url}/_fake/config, /_fake/faults, /_fake/reset; GET {url}/_fake/stats")
    _quiet_uvicorn()
    _show_fake_events()
    uvicorn.run(create_app(FakeLLMState(config)), host=args.host, port=args.port, log_level="info")
    return 0


__all__ = ["FakeLLMServer", "add_arguments", "run"]
