"""The standard agent conversation through LangChain's prebuilt agent (runs in the peer's own venv).

Reads the conversation from stdin as JSON (the fake provider's URL, the model, the system prompt,
the tools with their JSON schemas and what they return, the user's messages, whether to cache),
runs it on one thread through ``langchain.agents.create_agent`` (LangGraph's prebuilt ReAct loop,
an ``InMemorySaver`` keeping the thread's messages between turns) with ``ChatAnthropic`` at its
defaults, with or without ``AnthropicPromptCachingMiddleware`` at its defaults, and prints one JSON
line: each model call's usage as LangChain recorded it (``usage_metadata``).
"""

import json
import sys

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver


def _tool(spec, result):
    def call(**arguments):
        return result.format(name=spec["name"])

    return StructuredTool.from_function(
        call, name=spec["name"], description=spec["description"], args_schema=spec["schema"]
    )


def main():
    spec = json.load(sys.stdin)
    model = ChatAnthropic(model=spec["model"], base_url=spec["base_url"], api_key="bench")
    middleware = [AnthropicPromptCachingMiddleware()] if spec["caching"] else []
    agent = create_agent(
        model,
        tools=[_tool(tool, spec["tool_result"]) for tool in spec["tools"]],
        system_prompt=spec["system"],
        middleware=middleware,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "bench"}}
    messages = []
    for text in spec["messages"]:
        state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
        messages = state["messages"]
    calls = []
    for message in messages:
        if isinstance(message, AIMessage):
            usage = message.usage_metadata or {}
            details = usage.get("input_token_details") or {}
            calls.append(
                {
                    "input": usage.get("input_tokens", 0),  # uncached + cache reads + cache writes
                    "read": details.get("cache_read", 0),
                    "write": details.get("cache_creation", 0),
                    "output": usage.get("output_tokens", 0),
                }
            )
    print(json.dumps({"calls": calls, "answer": messages[-1].text}))


main()
