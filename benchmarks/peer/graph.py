"""The peer under test: a minimal LangGraph chat graph calling the same fake provider.

Served by ``langgraph dev`` (the in-memory langgraph-api server). One node, one model call,
streamed: the same standard turn AgentVM runs.
"""

from langchain_anthropic import ChatAnthropic
from langgraph.graph import END, START, MessagesState, StateGraph

model = ChatAnthropic(model="claude-haiku-4-5", max_tokens=1024, streaming=True, max_retries=0)


async def chat(state: MessagesState) -> dict:
    return {"messages": [await model.ainvoke(state["messages"])]}


graph = (
    StateGraph(MessagesState).add_node("chat", chat).add_edge(START, "chat").add_edge("chat", END).compile()
)
