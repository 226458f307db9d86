"""An MCP server whose tools change, on the official SDK (stdio): ``python changing_server.py``.

``grow`` adds a tool (``extra_<n>``) and tells the client (``notifications/tools/list_changed``),
on both channels (the 2026-07-28 revision's ``subscriptions/listen`` stream and the earlier
revisions' notification), as a server does whose tools depend on what the user did; ``ping`` answers ``pong``.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("agentvm-test-changing-tools")
_added: list[str] = []


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add one more tool, and say that the list changed."""
    name = f"extra_{len(_added) + 1}"

    def extra() -> str:
        return name

    server.add_tool(extra, name=name, description=f"The added tool {name}.")
    _added.append(name)
    await ctx.notify_tools_changed()  # 2026-07-28: to the client's subscriptions/listen stream
    await ctx.session.send_tool_list_changed()  # earlier revisions: notifications/tools/list_changed
    return name


if __name__ == "__main__":
    server.run()
