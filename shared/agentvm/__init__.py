"""AgentVM: an AI agent runtime speaking the AgentX v1 WebSocket protocol.

One core (this package) runs on two hosts: AWS Lambda (``functions/``) and one local process
(``avm serve``). See ARCHITECTURE.md for the layout and README.md for the quick start.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
