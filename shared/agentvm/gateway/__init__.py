"""Frames in, responses out: the AgentX v1 protocol (``agentx_v1``), its commands, and the dispatcher."""
