"""Full-text search over a tenant's (or one container's) messages: syntax, tokens, matching, paging.

**Syntax.** Plain words and ``"quoted phrases"``, all of which must occur (AND); a word or phrase
ending in ``*`` matches by prefix (``deploy*``, ``"blue gre"*``). Case and Latin diacritics are
ignored (``Café`` finds ``cafe``); punctuation separates words, so ``e-mail`` is the phrase
``"e mail"``. Anything else (``OR``/``AND``/``NOT``/``NEAR``, ``-word``, ``( ) : ^ { } ~``, a
``*`` inside a word, an unbalanced quote) is refused with ``invalid_query``, never passed on to
an index, so a search can never fail with the engine's own syntax error.

**What is searched.** The text parts of user and assistant messages (what people read); tool
calls, tool results and errors are not. Results come by conversation (image), newest first, then
by message, newest first, each with a snippet around its first match. A page holds at most
``limit`` results; ``next`` is an opaque cursor for the following page (null at the end). A page
may hold fewer results, even none, and still have a ``next``: a store that scans stops at a byte
budget per request (the DynamoDB adapter), so no request reads more than that.

**One tokenizer for both stores.** ``tokens`` (case folded, Latin diacritics removed, runs of
letters and digits) is the only definition: the local index (SQLite FTS5, ``ascii`` tokenizer)
indexes text this function tokenized, and the DynamoDB adapter (and the local fallback without
FTS5) matches with ``matches``: both stores find the same messages.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import unicodedata
from typing import TYPE_CHECKING, Any

from agentvm.errors import BadRequest, InvalidQuery
from agentvm.messages import message_from_wire, message_to_wire
from agentvm.ports import MessageHit, SearchPage, SearchPosition, SearchTerm

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Callable, Sequence

    from agentvm.messages import Message
    from agentvm.records import ImageRecord
    from agentvm.runtime import Runtime

MAX_QUERY_CHARS = 500
MAX_TERMS = 16
MIN_PREFIX_CHARS = 2
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
SNIPPET_CHARS = 160

_WORD = re.compile(r"[^\W_]+")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_DIACRITICS = re.compile("[\u0300-\u036f]")  # the combining diacritical marks of Latin scripts
_RESERVED = set("(){}:^~")  # the syntax of other engines (grouping, fields, boosts)
_OPERATORS = {"AND", "OR", "NOT", "NEAR"}


# -- tokens --------------------------------------------------------------------------------------
def normalise(text: str) -> str:
    """Case folded, Latin diacritics removed: what tokens and the substring pre-check read."""
    if text.isascii():
        return text.lower()
    folded = unicodedata.normalize("NFD", text.casefold())
    return unicodedata.normalize("NFC", _DIACRITICS.sub("", folded))


def tokens(text: str) -> list[str]:
    """The words of ``text`` as search sees them: runs of letters and digits of its normal form."""
    norm = normalise(text)
    return (_ASCII_WORD if norm.isascii() else _WORD).findall(norm)


def searchable_text(wire: dict[str, Any]) -> str:
    """The searchable text of a stored message (its wire JSON): the text parts of a user or an
    assistant message, one per line; empty for every other message."""
    if wire.get("subtype") not in ("user", "assistant"):
        return ""
    content = wire.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text" and "text" in p
        )
    return ""


def matches(terms: Sequence[SearchTerm], text: str) -> bool:
    """Whether ``text`` holds every term (a phrase: its tokens in a row; a prefix term's last token
    starting the text's token)."""
    norm = normalise(text)
    # Cheap first: every token must occur as a substring; most texts fail here, untokenized.
    if not all(tok in norm for term in terms for tok in term.tokens):
        return False
    words = (_ASCII_WORD if norm.isascii() else _WORD).findall(norm)
    return all(_has(words, term) for term in terms)


def _has(words: list[str], term: SearchTerm) -> bool:
    n = len(term.tokens)
    head, last = term.tokens[:-1], term.tokens[-1]
    for i in range(len(words) - n + 1):
        if all(words[i + j] == tok for j, tok in enumerate(head)):
            word = words[i + n - 1]
            if word == last or (term.prefix and word.startswith(last)):
                return True
    return False


# -- the query language ----------------------------------------------------------------------------
_SUPPORTED = 'supported: plain words, "quoted phrases" and a trailing * for a prefix'


def parse_query(query: str) -> tuple[SearchTerm, ...]:
    """The terms of ``query``; ``InvalidQuery`` for anything this syntax does not have."""
    if not query or not query.strip():
        raise InvalidQuery(f"q: give at least one word to search for ({_SUPPORTED})")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidQuery(f"q: at most {MAX_QUERY_CHARS} characters")
    if query.count('"') % 2:
        raise InvalidQuery(f'q: a quote (") is not closed ({_SUPPORTED})')
    terms: list[SearchTerm] = []
    for match in re.finditer(r'"([^"]*)"(\*?)|(\S+?)(?="|\s|$)', query):
        phrase, star, word = match.group(1), match.group(2), match.group(3)
        if word is not None:
            terms.append(_word_term(word))
        else:
            terms.append(_term(phrase, prefix=bool(star), shown=match.group(0)))
    if len(terms) > MAX_TERMS:
        raise InvalidQuery(f"q: at most {MAX_TERMS} words and phrases")
    return tuple(terms)


def _word_term(word: str) -> SearchTerm:
    if word in _OPERATORS:
        raise InvalidQuery(
            f"q: {word} is not supported: every word must occur ({_SUPPORTED}; quote it to find it)"
        )
    if word.startswith("-") and len(word) > 1:
        raise InvalidQuery(f"q: excluding words (-word) is not supported ({_SUPPORTED})")
    reserved = sorted(_RESERVED & set(word))
    if reserved:
        raise InvalidQuery(f"q: {reserved[0]!r} is not part of the search syntax ({_SUPPORTED})")
    prefix = word.endswith("*")
    body = word[:-1] if prefix else word
    if "*" in body:
        raise InvalidQuery(f"q: * may only end a word ({_SUPPORTED})")
    return _term(body, prefix=prefix, shown=word)


def _term(text: str, *, prefix: bool, shown: str) -> SearchTerm:
    found = tuple(tokens(text))
    if not found:
        raise InvalidQuery(f"q: {shown!r} has no letters or digits to search for")
    if prefix and len(found[-1]) < MIN_PREFIX_CHARS:
        raise InvalidQuery(f"q: a prefix needs at least {MIN_PREFIX_CHARS} letters or digits ({shown!r})")
    return SearchTerm(found, prefix)


# -- cursors ------------------------------------------------------------------------------------------
def encode_cursor(position: SearchPosition | None) -> str | None:
    if position is None:
        return None
    raw = json.dumps([position.created_at, position.image_id, position.seq], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> SearchPosition | None:
    if not cursor:
        return None
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        created_at, image_id, seq = raw
        if not (isinstance(created_at, int) and isinstance(image_id, str) and isinstance(seq, int)):
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise BadRequest("cursor: not a cursor this search returned") from None
    return SearchPosition(created_at, image_id, seq)


# -- scanning: the search of stores without an index ---------------------------------------------------
def _after(image: ImageRecord, after: SearchPosition | None) -> bool:
    """Whether ``image`` comes at or after the cursor's image (results run newest first)."""
    return after is None or (image.createdAt, image.imageId) <= (after.created_at, after.image_id)


async def scan(
    images: Sequence[ImageRecord],
    pages: Callable[[ImageRecord, int | None], AsyncGenerator[Sequence[tuple[int, str]]]],
    terms: Sequence[SearchTerm],
    *,
    limit: int,
    after: SearchPosition | None,
    budget_bytes: int | None = None,
) -> SearchPage:
    """Search by reading messages: ``images`` newest first, each one's messages through ``pages``
    (``(seq, wire JSON)`` newest first, below a seq when given). Stops at ``limit`` hits, or at the
    end of a page once ``budget_bytes`` of messages were read (``next`` then says where)."""
    hits: list[MessageHit] = []
    scanned = 0
    last: SearchPosition | None = None
    for image in sorted(images, key=lambda i: (i.createdAt, i.imageId), reverse=True):
        if not _after(image, after):
            continue
        same = after is not None and (image.createdAt, image.imageId) == (after.created_at, after.image_id)
        below = after.seq if same and after is not None else None
        stream = pages(image, below)
        try:
            async for page in stream:
                for seq, body in page:
                    last = SearchPosition(image.createdAt, image.imageId, seq)
                    scanned += len(body)
                    wire = json.loads(body)
                    text = searchable_text(wire)
                    if text and matches(terms, text):
                        hits.append(MessageHit(image, seq, message_from_wire(wire)))
                        if len(hits) >= limit:
                            return SearchPage(hits, last)
                if budget_bytes is not None and scanned >= budget_bytes:
                    return SearchPage(hits, last)
        finally:
            await stream.aclose()
    return SearchPage(hits, None)


# -- the search --------------------------------------------------------------------------------------------
def snippet(message: Message, terms: Sequence[SearchTerm]) -> str:
    """A passage of the message's text around its first match (or its start)."""
    text = searchable_text(message_to_wire(message))
    folded = text.casefold()
    at = -1
    if len(folded) == len(text):  # offsets hold only when folding kept the length
        at = min((i for t in terms if (i := folded.find(t.tokens[0])) >= 0), default=-1)
    start = max(0, at - SNIPPET_CHARS // 3) if at >= 0 else 0
    end = min(len(text), start + SNIPPET_CHARS)
    shown = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + shown + ("…" if end < len(text) else "")


def hit_to_wire(hit: MessageHit, terms: Sequence[SearchTerm]) -> dict[str, Any]:
    m = hit.message
    return {
        "containerId": hit.image.containerId,
        "imageId": hit.image.imageId,
        "sessionId": hit.image.sessionId,
        "name": hit.image.name,
        "messageId": m.id,
        "seq": hit.seq,
        "role": m.role,
        "timestamp": m.timestamp,
        "snippet": snippet(m, terms),
    }


async def search_sessions(
    rt: Runtime,
    tenant_id: str,
    query: str,
    *,
    container_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> dict[str, Any]:
    """``GET /v1/sessions/search``: one page of the tenant's (or a container's) matching messages."""
    if rt.sessions is None:
        raise BadRequest("this server has no session centre (search)")
    terms = parse_query(query)
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit: between 1 and {MAX_LIMIT}")
    after = decode_cursor(cursor)
    page = await rt.sessions.search_messages(
        tenant_id, terms, container_id=container_id, limit=limit, after=after
    )
    return {"results": [hit_to_wire(h, terms) for h in page.hits], "next": encode_cursor(page.next)}


__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "decode_cursor",
    "encode_cursor",
    "hit_to_wire",
    "matches",
    "normalise",
    "parse_query",
    "scan",
    "search_sessions",
    "searchable_text",
    "snippet",
    "tokens",
]
