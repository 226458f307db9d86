"""A fake LLM provider speaking the real Anthropic, OpenAI and Bedrock Converse streaming wire formats,
and their embedding endpoints (``embeddings.py``; deterministic vectors, ``vectors.py``).

The official SDKs talk to it unchanged (point their base URL at it), so adapters, retries and
cancellation are tested for real without internet or keys. Faults (429, 500, overloaded, cut
streams) are injected per request; ``/_fake/stats`` counts tokens and early disconnects.

Importing this package stays cheap: Starlette and uvicorn load only when a server starts.
"""

from __future__ import annotations

from agentvm.fakellm.server import FakeLLMServer, add_arguments, run
from agentvm.fakellm.state import FAULT_KINDS, FakeLLMConfig, FakeLLMState, Fault, reply_tokens

__all__ = [
    "FAULT_KINDS",
    "FakeLLMConfig",
    "FakeLLMServer",
    "FakeLLMState",
    "Fault",
    "add_arguments",
    "reply_tokens",
    "run",
]
