"""The MCP client (official ``mcp`` SDK): stdio, Streamable HTTP and SSE servers as tool sources."""
