"""Real MCP servers for tests, built with the official ``mcp`` SDK."""
