"""AgentVM: an AI agent runtime speaking the AgentX v1 WebSocket protocol.

One core (this package) runs on two hosts: AWS Lambda (``functions/``) and one local process
(``avm serve``). README.md has the quick start and the layout; docs/protocol.md the wire protocol.
"""

__version__ = "0.1.0"
# The name on the package index ("agentvm" there is an unrelated project): what to pip install.
DISTRIBUTION = "agentvm-runtime"

__all__ = ["DISTRIBUTION", "__version__"]
