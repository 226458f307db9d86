"""The reply cache: an image that opts in (``replyCache: {"enabled": true, "ttlS": 86400}``) answers
a session's first question from the reply its config gave the same question before, without calling
the model.

What may be cached (``cache_lookup``): the turn answers the session's FIRST user message (no history,
no compaction summary), that message is text only (no attachments), and the image declares no tools
and no MCP servers (its reply can depend on nothing but the prompt and the question). Anything else
never reads or writes the cache.

The key, per tenant (the store's partition): the digest of what shapes the reply (the image's system
prompt, model and routing fields, tools, and the server's output limit: ``config_digest``), the model
the turn resolved to, and the question normalised (Unicode NFKC, casefolded, whitespace collapsed,
trailing punctuation stripped: ``normalise_question``). The image id is not in it: each session has
its own image, so an id would make every first question a miss; two images with the same config
(many users' copies of one agent) share their replies, and an image update that changes any of those
fields changes the digest, so its old replies are never served again (they expire by TTL).

A hit (``answer_from_cache``) streams the reply through the turn's hooks as a model's would
(``message_start``, text deltas, then the usual end: the sink and ``turns.finish``), is stored as the
session's assistant message by the one finish path, and writes the turn's usage record with
``kind: "reply_cache"``: 0 tokens (a hit is free: no model was called) and ``savedInputTokens`` /
``savedOutputTokens``, what the call that wrote the reply cost. A miss that qualifies stores the
reply (``remember_reply``) once the turn ends normally: one model call, ``end_turn``, no tool
calls, no error, provider-reported usage. A cache that fails never fails the turn.

**The storage quota** (``security/storage_quota.py``; decision in SECURITY.md, "Storage quotas").
Cached replies are not charged to the tenant's storage account: the cache bounds itself per tenant
(``DEFAULT_REPLY_SLOTS`` entries of at most ``MAX_CACHED_CHARS`` characters) and evicts and expires
on its own, without telling anyone (DynamoDB's TTL deletes an expired item with no event to give
its bytes back on), so a charge could not be kept exact; and it is the platform's derived data, not
what the tenant chose to store, so it must not crowd the tenant's own messages out of its account.
Instead a put that would take a tenant past its quota (what it stores now plus this reply's bytes,
``reply_bytes``) is **skipped**: the turn is answered and billed as usual, its reply just is not
kept. A tenant at its quota therefore stops filling the cache; the replies it holds stay served.
The check costs one read of the account (``StorageAccount.used``) per qualifying miss, never a hit;
one that fails skips the put.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from agentvm.agent.loop import StepOutcome, TurnOutcome
from agentvm.messages import UserMessage, text_of
from agentvm.ports.replies import DEFAULT_REPLY_TTL_S, CachedReply
from agentvm.records import UsageRecord

if TYPE_CHECKING:
    from agentvm.agent.context import TurnContext
    from agentvm.records import ImageRecord, TurnJob
    from agentvm.runtime import Runtime
    from agentvm.turns.hooks import TurnHooks

log = logging.getLogger("agentvm.turns")

REPLY_CACHE_KIND: Final = "reply_cache"
# A longer reply is not cached: it keeps an item far under DynamoDB's 400 KB, and a tenant's cache
# under 1,024 x 32 K characters (it is not charged to the tenant's storage account: a put that would
# take the tenant past its quota is skipped instead, ``fits_the_quota``)
MAX_CACHED_CHARS = 32_000
_WORDS_PER_DELTA = 4  # a hit's text goes out in deltas of a few words, as a model's does
_WORD = re.compile(r"\s*\S+\s*")


@dataclass(frozen=True)
class CacheLookup:
    """Where a qualifying turn's reply is looked up and stored."""

    tenant_id: str
    key: str
    model_ref: str
    ttl_s: int


def normalise_question(text: str) -> str:
    """The question as the cache compares it: NFKC, casefolded, whitespace collapsed, trailing
    punctuation (any Unicode punctuation) stripped."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    end = len(folded)
    while end and (folded[end - 1].isspace() or unicodedata.category(folded[end - 1]).startswith("P")):
        end -= 1
    return folded[:end]


def config_digest(image: ImageRecord, *, max_output_tokens: int) -> str:
    """What shapes an image's reply to a first question, hashed: equal configs share replies."""
    shaping = {
        "systemPrompt": image.systemPrompt,
        "model": image.model,
        "fastModel": image.fastModel,
        "fastMaxChars": image.fastMaxChars,
        "tools": image.tools,
        "mcpServers": image.mcpServers,
        "maxOutputTokens": max_output_tokens,
    }
    return hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode()).hexdigest()


def first_question(image: ImageRecord, context: TurnContext, job: TurnJob) -> str | None:
    """The normalised question of a turn that may use the image's cache; None: it may not (the
    cache is off, the image has tools, the session has history, the message has attachments)."""
    policy = image.replyCache
    if not policy or not policy.get("enabled", True) or image.tools or image.mcpServers:
        return None
    entries = context.entries
    # the session's first message (seq 1, whatever the history window) is the turn's own
    if context.summary is not None or not entries or entries[0].seq != 1:
        return None
    question = entries[0].message
    if question.id != job.userMessageId:
        return None
    if not isinstance(question, UserMessage):
        return None
    if not isinstance(question.content, str) and any(part.type != "text" for part in question.content):
        return None
    return normalise_question(text_of(question.content)) or None


def cache_lookup(
    rt: Runtime, job: TurnJob, image: ImageRecord, context: TurnContext, model_ref: str
) -> CacheLookup | None:
    """Where this turn's reply is cached; None: the turn does not use the cache."""
    if rt.replies is None or not rt.turns.reply_cache:
        return None
    question = first_question(image, context, job)
    if question is None:
        return None
    digest = config_digest(image, max_output_tokens=rt.turns.max_output_tokens)
    key = hashlib.sha256(json.dumps([digest, model_ref, question]).encode()).hexdigest()
    ttl_s = int((image.replyCache or {}).get("ttlS") or DEFAULT_REPLY_TTL_S)
    return CacheLookup(job.tenantId, key, model_ref, ttl_s)


async def cached_reply(rt: Runtime, lookup: CacheLookup) -> CachedReply | None:
    """The cached reply, if any (a store that fails is a miss)."""
    assert rt.replies is not None
    try:
        return await rt.replies.get(lookup.tenant_id, lookup.key, now_ms=rt.clock.now_ms())
    except Exception:
        log.warning("reply cache read failed; calling the model", exc_info=True)
        return None


async def answer_from_cache(
    rt: Runtime, job: TurnJob, hooks: TurnHooks, reply: CachedReply, model_name: str
) -> TurnOutcome:
    """Answer the turn with ``reply``: stream it as a model's reply, bill it as a hit (0 tokens,
    the tokens saved recorded); the caller's finish path stores it as the assistant message."""
    message_id = rt.ids.new("msg")
    hooks.on_start(message_id, model_name)
    deltas = 0
    words = _WORD.findall(reply.text)
    for i in range(0, len(words), _WORDS_PER_DELTA):
        hooks.on_text("".join(words[i : i + _WORDS_PER_DELTA]))
        deltas += 1
    await rt.store.put_usage(
        UsageRecord(
            turnId=job.turnId,
            tenantId=job.tenantId,
            containerId=job.containerId,
            imageId=job.imageId,
            sessionId=job.sessionId,
            model=hooks.model_ref,
            durationMs=0,
            status="completed",
            createdAt=rt.clock.now_ms(),
            kind=REPLY_CACHE_KIND,
            routedBy=hooks.routed_by,
            savedInputTokens=reply.input_tokens,
            savedOutputTokens=reply.output_tokens,
        )
    )
    step = StepOutcome(
        index=0,
        model=model_name,
        text=reply.text,
        message_id=message_id,
        stop_reason="end_turn",
        usage_reported=True,
        deltas=deltas,
    )
    return TurnOutcome(
        model=model_name,
        text=reply.text,
        message_id=message_id,
        stop_reason="end_turn",
        usage_reported=True,
        deltas=deltas,
        last=step,
    )


async def remember_reply(rt: Runtime, lookup: CacheLookup, outcome: TurnOutcome) -> bool:
    """Store a qualifying turn's reply if the turn ended normally (one model call, ``end_turn``, no
    tool calls, no error, usage the provider reported) and it is not too long to keep
    (``MAX_CACHED_CHARS``). True if it was stored."""
    last = outcome.last
    normal = (
        last is not None
        and outcome.error is None
        and not outcome.interrupted
        and not outcome.suspended
        and outcome.steps == 1
        and outcome.tool_calls == 0
        and not last.calls
        and outcome.stop_reason == "end_turn"
        and outcome.usage_reported
        and bool(outcome.text.strip())
        and len(outcome.text) <= MAX_CACHED_CHARS
    )
    if not normal or rt.replies is None:
        return False
    now = rt.clock.now_ms()
    reply = CachedReply(
        key=lookup.key,
        text=outcome.text,
        model=lookup.model_ref,
        input_tokens=outcome.input_tokens,
        output_tokens=outcome.output_tokens,
        created_at=now,
        expires_at=now + lookup.ttl_s * 1000,
    )
    try:
        if not await fits_the_quota(rt, lookup.tenant_id, reply_bytes(reply)):
            log.info("reply not cached: the tenant's storage account has no room for it")
            return False
        await rt.replies.put(lookup.tenant_id, reply)
    except Exception:
        log.warning("reply cache write failed; the turn is unaffected", exc_info=True)
        return False
    return True


def reply_bytes(reply: CachedReply) -> int:
    """The bytes a cached reply holds: its text, key and model (UTF-8)."""
    return len(reply.text.encode()) + len(reply.key) + len(reply.model.encode())


async def fits_the_quota(rt: Runtime, tenant_id: str, size: int) -> bool:
    """Whether the tenant's storage account has room for ``size`` more bytes (no quota: always).
    Nothing is taken: cached replies are not charged (the module's note)."""
    quota = rt.storage_quota
    if quota is None:
        return True
    limit = await quota.limit_of(tenant_id)
    return limit <= 0 or await quota.used(tenant_id) + size <= limit


__all__ = [
    "MAX_CACHED_CHARS",
    "REPLY_CACHE_KIND",
    "CacheLookup",
    "answer_from_cache",
    "cache_lookup",
    "cached_reply",
    "config_digest",
    "first_question",
    "fits_the_quota",
    "normalise_question",
    "remember_reply",
    "reply_bytes",
]
