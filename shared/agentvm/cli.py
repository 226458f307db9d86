"""The ``avm`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentvm import __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="avm", description="AgentVM: an AI agent runtime.")
    parser.add_argument("--version", action="version", version=f"avm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run AgentVM locally (HTTP + WebSocket at /ws)")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1, env AVM_HOST)")
    serve.add_argument("--port", type=int, help="port (default 8080, env AVM_PORT)")
    serve.add_argument(
        "--data-dir", type=Path, help="where state lives (default ~/.agentvm, env AVM_DATA_DIR)"
    )
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING... (default INFO, env AVM_LOG_LEVEL)")

    fake = sub.add_parser("fake-llm", help="run a fake Anthropic/OpenAI streaming server on loopback")
    from agentvm.fakellm import add_arguments

    add_arguments(fake)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "fake-llm":
        from agentvm.fakellm import run

        return run(args)
    return 2


def _serve(args: argparse.Namespace) -> int:
    from agentvm.bootstrap import local_runtime
    from agentvm.config import Settings
    from agentvm.logs import configure_logging
    from agentvm.server import serve

    overrides = {
        k: v
        for k, v in {
            "host": args.host,
            "port": args.port,
            "data_dir": args.data_dir,
            "log_level": args.log_level,
        }.items()
        if v is not None
    }
    settings = Settings(**overrides)  # explicit flags beat the environment
    secrets = [
        s.get_secret_value() for s in (settings.anthropic_api_key, settings.openai_api_key) if s is not None
    ]
    configure_logging(settings.log_level, secrets=secrets)
    serve(local_runtime(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
