"""The core: gateway, turns, the agent loop. Imports only agentvm domain modules and ports."""
