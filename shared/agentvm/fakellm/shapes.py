"""The request shapes the fake refuses as the real APIs do (HTTP 400), for the content that is easy
to get wrong: tool results carrying images, and images in messages. What the real APIs accept
(their API references, 2026): an Anthropic ``tool_result``'s ``content`` is a string or a list of
``text``, ``image``, ``document`` and ``search_result`` blocks, text blocks never empty, images
base64 PNG, JPEG, GIF or WebP; an OpenAI Chat Completions ``tool`` message's content is a string or
text parts only (images go in a ``user`` message), and every ``tool`` message answers a call of the
assistant message before it; a Bedrock Converse ``toolResult``'s content is a list of ``text``,
``json``, ``image``, ``document`` and ``video`` blocks, an image's format one of png, jpeg, gif,
webp and its bytes base64 in the JSON body.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

_ANTHROPIC_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
_ANTHROPIC_RESULT_BLOCKS = {"text", "image", "document", "search_result"}
_BEDROCK_RESULT_BLOCKS = {"text", "json", "image", "document", "video"}
_BEDROCK_IMAGE_FORMATS = {"png", "jpeg", "gif", "webp"}


def request_problem(kind: str, body: dict[str, Any]) -> str | None:
    """Why the real API would refuse ``body`` (one of the checks above), or None."""
    check = {"anthropic": _anthropic, "openai": _openai, "bedrock": _bedrock}.get(kind)
    return check(body) if check is not None else None


def _anthropic(body: dict[str, Any]) -> str | None:
    for i, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else ()):
            where = f"messages.{i}.content.{j}"
            if block.get("type") == "image":
                problem = _anthropic_image(block, where)
                if problem:
                    return problem
            if block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if inner is None or isinstance(inner, str):
                continue
            if not isinstance(inner, list):
                return f"{where}.content: Input should be a valid string or list"
            for k, part in enumerate(inner):
                kind = part.get("type")
                if kind not in _ANTHROPIC_RESULT_BLOCKS:
                    return f"{where}.content.{k}.type: Input tag '{kind}' is not a tool_result content block"
                if kind == "text" and not part.get("text"):
                    return f"{where}.content.{k}: text content blocks must be non-empty"
                if kind == "image":
                    problem = _anthropic_image(part, f"{where}.content.{k}")
                    if problem:
                        return problem
    return None


def _anthropic_image(block: dict[str, Any], where: str) -> str | None:
    source = block.get("source") or {}
    if source.get("type") == "url":
        return None
    if source.get("type") != "base64":
        return f"{where}.source.type: must be base64 or url"
    if source.get("media_type") not in _ANTHROPIC_IMAGE_TYPES:
        return f"{where}.source.media_type: Input should be one of {sorted(_ANTHROPIC_IMAGE_TYPES)}"
    if not _is_base64(source.get("data")):
        return f"{where}.source.data: invalid base64 data"
    return None


def _openai(body: dict[str, Any]) -> str | None:
    answerable: set[str] = set()
    for i, message in enumerate(body.get("messages") or ()):
        role = message.get("role")
        if role == "assistant":
            answerable = {c.get("id") for c in message.get("tool_calls") or ()}
            continue
        if role != "tool":
            answerable = set()
            content = message.get("content")
            for j, part in enumerate(content if isinstance(content, list) else ()):
                if part.get("type") == "image_url":
                    url = str((part.get("image_url") or {}).get("url") or "")
                    if url.startswith("data:") and not _is_base64(url.partition(",")[2]):
                        return f"Invalid 'messages[{i}].content[{j}].image_url.url': invalid base64 data URL"
            continue
        if message.get("tool_call_id") not in answerable:
            return (
                f"Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                f"message with 'tool_calls' (messages[{i}])"
            )
        content = message.get("content")
        if isinstance(content, list) and any(p.get("type") != "text" for p in content):
            return f"Invalid 'messages[{i}]': a tool message's content parts must be of type 'text'"
    return None


def _bedrock(body: dict[str, Any]) -> str | None:
    for i, message in enumerate(body.get("messages") or ()):
        for j, block in enumerate(message.get("content") or ()):
            result = block.get("toolResult")
            if result is None:
                if "image" in block:
                    problem = _bedrock_image(block["image"], f"messages.{i}.content.{j}.image")
                    if problem:
                        return problem
                continue
            for k, part in enumerate(result.get("content") or ()):
                where = f"messages.{i}.content.{j}.toolResult.content.{k}"
                if len(part) != 1 or next(iter(part)) not in _BEDROCK_RESULT_BLOCKS:
                    allowed = sorted(_BEDROCK_RESULT_BLOCKS)
                    return f"{where}: a ToolResultContentBlock holds exactly one of {allowed}"
                if "text" in part and not str(part["text"]).strip():
                    return f"{where}.text: The text field in the ContentBlock object is blank"
                if "image" in part:
                    problem = _bedrock_image(part["image"], f"{where}.image")
                    if problem:
                        return problem
    return None


def _bedrock_image(image: dict[str, Any], where: str) -> str | None:
    if image.get("format") not in _BEDROCK_IMAGE_FORMATS:
        return f"{where}.format: Member must satisfy enum value set {sorted(_BEDROCK_IMAGE_FORMATS)}"
    if not _is_base64((image.get("source") or {}).get("bytes")):
        return f"{where}.source.bytes: invalid base64"
    return None


def _is_base64(data: object) -> bool:
    if not isinstance(data, str) or not data:
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


__all__ = ["request_problem"]
