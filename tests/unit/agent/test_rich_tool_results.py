"""Rich tool results: an MCP ``CallToolResult`` as blocks (``adapters/mcp/client._output``), the
media limits (``agent/tools/media.py``), and the stored form that history replays."""

from __future__ import annotations

import base64

from mcp import types as mcp_types

from agentvm.adapters.mcp.client import _output
from agentvm.agent.history import stored_output, tool_result_of
from agentvm.agent.tools.media import bounded_blocks
from agentvm.llm import Attachment, ToolResult
from agentvm.messages import ToolResultMessage, ToolResultPart, message_from_wire, message_to_wire

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 92).decode()  # 100 bytes


def _result(*content, structured=None, is_error=False):
    return mcp_types.CallToolResult(content=list(content), structured_content=structured, is_error=is_error)


def test_text_only_results_stay_plain_text():
    out = _output(_result(mcp_types.TextContent(type="text", text="hi")))
    assert (out.text, out.blocks, out.structured) == ("hi", (), None)


def test_images_audio_and_blobs_become_media_blocks_in_order():
    out = _output(
        _result(
            mcp_types.TextContent(type="text", text="look:"),
            mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            mcp_types.AudioContent(type="audio", data=PNG, mime_type="audio/wav"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(
                    uri="file:///a.pdf", mime_type="application/pdf", blob=PNG
                ),
            ),
            mcp_types.EmbeddedResource(
                type="resource", resource=mcp_types.TextResourceContents(uri="file:///n.txt", text="notes")
            ),
            mcp_types.ResourceLink(
                type="resource_link", name="log", uri="file:///log.txt", mime_type="text/plain"
            ),
        )
    )
    assert out.blocks[0] == "look:"
    assert out.blocks[1] == Attachment("image", "image/png", PNG)
    assert out.blocks[2] == Attachment("file", "audio/wav", PNG)
    assert out.blocks[3] == Attachment("file", "application/pdf", PNG, "file:///a.pdf")
    assert out.blocks[4:] == ("notes", "[resource log: file:///log.txt (text/plain)]")
    assert out.text.splitlines() == [
        "look:",
        "[image (image/png, 100 bytes)]",
        "[audio (audio/wav, 100 bytes)]",
        "[file file:///a.pdf (application/pdf, 100 bytes)]",
        "notes",
        "[resource log: file:///log.txt (text/plain)]",
    ]


def test_an_image_type_no_provider_takes_is_a_file_not_an_image():
    out = _output(_result(mcp_types.ImageContent(type="image", data=PNG, mime_type="image/svg+xml")))
    assert out.blocks[0].kind == "file"


def test_structured_content_is_kept_and_read_as_json_unless_the_text_carries_it():
    alone = _output(_result(structured={"temp": 21}))
    assert alone.text == '{"temp": 21}' and alone.structured == {"temp": 21}
    echoed = _output(
        _result(mcp_types.TextContent(type="text", text='{"temp": 21}'), structured={"temp": 21})
    )
    assert echoed.text == '{"temp": 21}'
    wrapped = _output(_result(mcp_types.TextContent(type="text", text="5"), structured={"result": 5}))
    assert wrapped.text == "5" and wrapped.structured == {"result": 5}
    other = _output(_result(mcp_types.TextContent(type="text", text="warm"), structured={"temp": 21}))
    assert other.text == 'warm\n{"temp": 21}'


def test_media_over_a_limit_become_placeholders_with_a_note():
    big = Attachment("image", "image/png", base64.b64encode(b"x" * 3000).decode())
    small = Attachment("image", "image/png", PNG)
    kept = bounded_blocks(
        ["a", small, big, small, small], max_block_bytes=2000, max_result_bytes=250, max_chars=100
    )
    assert kept[:2] == ("a", small)
    assert kept[2] == "[image (image/png, 3000 bytes)] [not sent: over the 1 KB limit of one block]"
    assert kept[3] == small
    assert kept[4] == "[image (image/png, 100 bytes)] [not sent: over the 250 bytes limit of one result]"


def test_text_blocks_share_the_results_character_cap():
    kept = bounded_blocks(["x" * 8, "y" * 8, "z"], max_chars=10)
    assert kept[0] == "x" * 8 and kept[1].startswith("yy\n[output truncated: 2 of 8")
    assert len(kept) == 2


def _stored(result: ToolResult, structured=None) -> ToolResultMessage:
    message = ToolResultMessage(
        id="msg_r",
        timestamp=1,
        toolCallId=result.call_id,
        toolResult=ToolResultPart(
            id=result.call_id, name=result.name, output=stored_output(result, structured=structured)
        ),
    )
    again = message_from_wire(message_to_wire(message))
    assert isinstance(again, ToolResultMessage)
    return again


def test_a_rich_result_is_stored_as_content_and_read_back_the_same():
    blocks = (
        "see",
        Attachment("image", "image/png", PNG),
        Attachment("file", "application/pdf", PNG, "a.pdf"),
    )
    result = ToolResult("c1", "shot", "see\n[image (image/png, 100 bytes)]", blocks=blocks)
    message = _stored(result, structured={"w": 1})
    output = message.toolResult.output
    assert output.type == "content" and output.structuredContent == {"w": 1}
    assert output.value[1] == {"type": "media", "data": PNG, "mediaType": "image/png"}
    assert output.value[2]["filename"] == "a.pdf"
    back = tool_result_of(message)
    assert back.blocks == blocks and not back.is_error
    assert back.content == "see\n[image (image/png, 100 bytes)]\n[file a.pdf (application/pdf, 100 bytes)]"


def test_plain_and_error_results_keep_their_text_types():
    assert _stored(ToolResult("c1", "t", "42")).toolResult.output.type == "text"
    failed = _stored(ToolResult("c1", "t", "boom", is_error=True), structured={"code": 7})
    assert failed.toolResult.output.type == "error-text" and failed.toolResult.output.structuredContent == {
        "code": 7
    }


def test_the_fake_llm_refuses_tool_result_shapes_the_real_apis_refuse():
    from agentvm.fakellm.shapes import request_problem

    def anthropic(*blocks):
        result = {"type": "tool_result", "tool_use_id": "c1", "content": list(blocks)}
        return {"messages": [{"role": "user", "content": [result]}]}

    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert request_problem("anthropic", anthropic({"type": "text", "text": "a"}, image)) is None
    assert "non-empty" in request_problem("anthropic", anthropic({"type": "text", "text": ""}))
    svg = {"type": "image", "source": {"type": "base64", "media_type": "image/svg+xml", "data": PNG}}
    assert "media_type" in request_problem("anthropic", anthropic(svg))
    assert "not a tool_result content block" in request_problem("anthropic", anthropic({"type": "audio"}))

    def bedrock(*content):
        return {
            "messages": [
                {"role": "user", "content": [{"toolResult": {"toolUseId": "c1", "content": list(content)}}]}
            ]
        }

    png = {"image": {"format": "png", "source": {"bytes": PNG}}}
    assert request_problem("bedrock", bedrock({"text": "a"}, png)) is None
    assert "blank" in request_problem("bedrock", bedrock({"text": " "}))
    assert "enum" in request_problem(
        "bedrock", bedrock({"image": {"format": "svg", "source": {"bytes": PNG}}})
    )
    orphan = {
        "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "1"}]
    }
    assert "must be a response" in request_problem("openai", orphan)
