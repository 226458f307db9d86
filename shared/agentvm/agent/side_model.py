"""The model of side calls (titles, compaction summaries): by default the image model's cheap sibling.

A side call needs no frontier model, so unless the image says otherwise it goes to the cheapest
current model of the image model's **own provider** (same credentials, same bill, same region
prefix on Bedrock): Anthropic Claude Sonnet/Opus -> Claude Haiku, OpenAI gpt-5 / gpt-4.1 / gpt-4o
(or a dated snapshot of them) -> its ``-mini``, Bedrock Claude Sonnet/Opus -> Bedrock Claude Haiku
under the same inference-profile prefix (``us.``, ``eu.``, ``apac.``, ``global.`` or none). Anything
else (echo, the fake LLM, OpenAI-compatible endpoints, a model already small, unknown names) keeps
its own model.

Where the names come from (checked November 2026): Anthropic's models overview lists Claude Haiku
5.5 as the current Haiku (API id ``claude-haiku-5-5``; Haiku 4.5 is legacy); its Bedrock id is
``anthropic.claude-haiku-5-5`` (with ``us.`` etc. for the cross-region profiles, per the Bedrock
model card and the AI SDK's Bedrock model list); OpenAI's model pages name ``gpt-5-mini``,
``gpt-4.1-mini`` and ``gpt-4o-mini`` as the small models of those families. All are priced by
genai-prices (``observability/pricing.py``).

The image's ``sideModel`` decides first: a ref is used as given, ``""`` (or the image's model
itself) means no cheap model. The server-wide ``sessions.titleModel`` / ``compaction.model``
settings, when set, still win for their call (``turns/title.py``, ``agent/compaction.py``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentvm.ports import ModelClient
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime

ANTHROPIC_HAIKU = "claude-haiku-5-5"
BEDROCK_HAIKU = "anthropic.claude-haiku-5-5"
# OpenAI families and their small sibling; a dated snapshot (gpt-4o-2024-08-06) maps likewise.
OPENAI_MINI = {"gpt-5": "gpt-5-mini", "gpt-4.1": "gpt-4.1-mini", "gpt-4o": "gpt-4o-mini"}

_ANTHROPIC_BIG = re.compile(r"^claude-(?:[\d-]+-)?(?:sonnet|opus)\b")
_OPENAI_FAMILY = re.compile(r"^(gpt-5|gpt-4\.1|gpt-4o)(?:-\d{4}-\d{2}-\d{2})?$")
_BEDROCK_BIG = re.compile(r"^(?P<prefix>(?:[a-z]+\.)?)anthropic\.claude-(?:[\d-]+-)?(?:sonnet|opus)\b")


def cheap_sibling(ref: str) -> str:
    """The cheap model of ``ref``'s provider (``"anthropic/claude-sonnet-4-6"`` ->
    ``"anthropic/claude-haiku-5-5"``), or ``ref`` itself when there is none."""
    provider, _, name = ref.partition("/")
    sibling: str | None = None
    if provider == "anthropic" and _ANTHROPIC_BIG.match(name):
        sibling = ANTHROPIC_HAIKU
    elif provider == "openai" and (family := _OPENAI_FAMILY.match(name)):
        sibling = OPENAI_MINI[family.group(1)]
    elif provider == "bedrock" and (big := _BEDROCK_BIG.match(name)):
        sibling = big.group("prefix") + BEDROCK_HAIKU
    return f"{provider}/{sibling}" if sibling else ref


def side_model_ref(image_model: str, side_model: str | None) -> str:
    """The model of an image's side calls: its ``sideModel`` if named (``""``: the image's own
    model), else the cheap sibling of ``image_model`` (the image's canonical model ref)."""
    if side_model is None:
        return cheap_sibling(image_model)
    return side_model or image_model


def resolve_side_model(
    rt: Runtime, image: ImageRecord, server_model: str | None
) -> tuple[ModelClient, str, str]:
    """(client, model name, canonical ref) of a side call on ``image``: the server's own setting
    for that call (``server_model``, e.g. ``sessions.titleModel``) if set, else the image's side
    model. The ref is what the usage record names: the model actually called."""
    if server_model:
        return rt.models.resolve(server_model)
    _, _, image_ref = rt.models.resolve(image.model)
    return rt.models.resolve(side_model_ref(image_ref, image.sideModel))


__all__ = [
    "ANTHROPIC_HAIKU",
    "BEDROCK_HAIKU",
    "OPENAI_MINI",
    "cheap_sibling",
    "resolve_side_model",
    "side_model_ref",
]
