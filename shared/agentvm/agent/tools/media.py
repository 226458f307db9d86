"""How much media one tool result may carry to the model and into the session's store.

A tool's media blocks (an MCP tool's image, audio, embedded blob) are kept while each stays within
``max_block_bytes`` (decoded; 5 MB by default, Anthropic's limit for one image) and all of them
within ``max_result_bytes``; a block over a limit becomes its text placeholder with a note saying
why, so the model knows there was something it cannot see. Text blocks share the result's
character cap (``max_output_chars``), as a plain text result does. What is kept is what is stored
with the turn's step, so a resumed turn and a later turn's history send the same blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from agentvm.llm import Attachment, ToolBlock

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentvm.ports import ToolOutput

MB = 1024 * 1024
DEFAULT_MAX_BLOCK_BYTES = 5 * MB
DEFAULT_MAX_RESULT_BYTES = 10 * MB


def bounded_blocks(
    blocks: Sequence[ToolBlock],
    *,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    max_chars: int,
) -> tuple[ToolBlock, ...]:
    """``blocks`` within the limits: media over one becomes a placeholder and a note; text is cut
    once the result's characters run out."""
    out: list[ToolBlock] = []
    media_bytes = 0
    chars_left = max_chars
    for block in blocks:
        if isinstance(block, Attachment):
            size = block.size
            if size > max_block_bytes:
                out.append(
                    f"{block.placeholder()} [not sent: over the {_size(max_block_bytes)} limit of one block]"
                )
            elif media_bytes + size > max_result_bytes:
                limit = _size(max_result_bytes)
                out.append(f"{block.placeholder()} [not sent: over the {limit} limit of one result]")
            else:
                media_bytes += size
                out.append(block)
            continue
        if chars_left <= 0:
            continue
        if len(block) > chars_left:
            out.append(
                block[:chars_left] + f"\n[output truncated: {chars_left} of {len(block)} characters shown]"
            )
            chars_left = 0
        else:
            out.append(block)
            chars_left -= len(block)
    return tuple(out)


class ResultLimits(Protocol):
    """Whoever holds a tool result's limits: a turn's ``Toolbox``, the host's ``ToolCatalog`` (a
    result that arrives outside a turn: an MCP task's, through the waits sweeper)."""

    max_output_chars: int
    max_media_block_bytes: int
    max_media_result_bytes: int


def result_blocks(output: ToolOutput, limits: ResultLimits) -> tuple[ToolBlock, ...]:
    """The blocks a tool's output keeps as a rich result, within ``limits``; none for a text result
    or an error (stored as text, its media as placeholders)."""
    if not output.blocks or output.is_error:
        return ()
    return bounded_blocks(
        output.blocks,
        max_block_bytes=limits.max_media_block_bytes,
        max_result_bytes=limits.max_media_result_bytes,
        max_chars=limits.max_output_chars,
    )


def _size(n: int) -> str:
    return f"{n / MB:g} MB" if n >= MB else f"{n // 1024} KB" if n >= 1024 else f"{n} bytes"


__all__ = [
    "DEFAULT_MAX_BLOCK_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "ResultLimits",
    "bounded_blocks",
    "result_blocks",
]
