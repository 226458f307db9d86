"""The fake provider's embeddings: deterministic vectors that carry a little meaning.

Not a model. A text's vector is a **signed feature hash** of what it shares with other texts on the
surface, so retrieval tests and benchmarks rank honestly on word overlap, and nothing else:

* **Features.** The text is NFKC-normalised and case-folded, cut into words (runs of letters and
  digits), stop words (``_STOP``) dropped. Each word is folded: a small built-in synonym table
  (``_SYNONYMS``: car → automobile, buy → purchase, ...) and then a light suffix stemmer
  (``_stem``: refunds, refunded, refunding → refund). Features are each folded word (weight 1),
  each pair of adjacent folded words (weight 0.5: "credit card" is closer to "credit card" than
  to "card credit"), and each character 3-gram of every word, as written but case-folded, padded
  with spaces (weight 0.08 each: "colour" ≈ "color", typos still land near).
* **Weights.** Counts are damped (1 + ln n), so a word repeated ten times is not ten times as
  important.
* **Hashing.** Each feature is hashed with BLAKE2b (8 bytes): the hash picks a dimension and a
  sign (+/-), so unrelated features cancel out on average rather than pile up. The vector is
  L2-normalised (unless the caller asks for it unnormalised, as Titan allows).

What it captures: shared words, shared stems, the built-in synonyms, word order within pairs,
spelling neighbours. What it does not: meaning without shared surface (a paraphrase with no
shared stem or listed synonym scores near 0), negation ("refund" ≈ "no refund"), languages
other than by shared characters, and any difference between a query and a document (the
``purpose`` a real model like Cohere's uses is ignored). Hash collisions add a small noise
(with d dimensions, two unrelated features share one with probability 1/d).

Same text, same dimension count → the same vector, on every run and platform: the hash is
BLAKE2b (not Python's salted ``hash``), the arithmetic is sums of fixed weights in a fixed
order, and each value is rounded to float32, as the providers send them. A shortened vector
(``dimensions`` below the model's) is hashed at that size, not cut from the full one: unlike
OpenAI's text-embedding-3 it is not a prefix of the longer vector.

Tokens (what usage reports): runs of letters/digits and runs of other non-space characters
(``count_tokens``), a rough stand-in for a BPE tokenizer's count.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from array import array
from collections import Counter
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+")
_TOKEN = re.compile(r"[^\W_]+|[^\w\s]+|_+")

# Words too common to tell texts apart.
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)

# A small synonym fold, applied before stemming: each word maps to its group's first word.
_SYNONYM_GROUPS = (
    ("automobile", "car", "vehicle"),
    ("purchase", "buy", "bought", "order"),
    ("refund", "reimbursement", "repayment", "moneyback"),
    ("cancel", "terminate", "abort"),
    ("error", "fault", "failure", "bug"),
    ("quick", "fast", "rapid", "speedy"),
    ("big", "large", "huge"),
    ("small", "little", "tiny"),
    ("begin", "start", "commence"),
    ("end", "finish", "stop"),
    ("help", "assist", "support"),
    ("price", "cost", "fee", "charge"),
    ("ship", "deliver", "dispatch"),
    ("delete", "remove", "erase"),
    ("password", "passphrase", "passcode"),
    ("account", "profile"),
    ("email", "mail", "e-mail"),
    ("phone", "telephone", "mobile"),
    ("doctor", "physician"),
    ("happy", "glad", "pleased"),
)

# Longest first; a stem keeps at least 3 characters.
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "es", "ly", "s")

# Per kind of feature: words, adjacent pairs, character 3-grams, the whole text (no words).
_WEIGHTS = {"w": 1.0, "p": 0.5, "g": 0.08, "t": 1.0}


def count_tokens(text: str) -> int:
    """The fake's token count of ``text`` (at least 1)."""
    return max(len(_TOKEN.findall(text)), 1)


def _stem(word: str) -> str:
    """Strip one suffix, then a final e: purchase, purchases, purchased -> purchas."""
    stem = word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                stem += "y"
            elif suffix in ("ed", "ing") and len(stem) > 3 and stem[-1] == stem[-2]:
                stem = stem[:-1]  # stopped -> stop, running -> run
            break
    return stem[:-1] if stem.endswith("e") and len(stem) > 3 else stem


# word (and its stem) -> its group's first word, stemmed
_SYNONYMS = {
    key: _stem(group[0]) for group in _SYNONYM_GROUPS for word in group for key in (word, _stem(word))
}


@lru_cache(maxsize=1 << 14)
def _fold(word: str) -> str:
    if word in _SYNONYMS:
        return _SYNONYMS[word]
    stem = _stem(word)
    return _SYNONYMS.get(stem, stem)


def features(text: str) -> dict[str, float]:
    """The weighted features of ``text``: each kind's weight x (1 + ln count), in a fixed order."""
    words = [w for w in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()) if w not in _STOP]
    counts: Counter[str] = Counter()
    folded = [_fold(w) for w in words]
    counts.update("w:" + word for word in folded)
    counts.update(f"p:{first} {second}" for first, second in zip(folded, folded[1:], strict=False))
    for word in words:
        padded = f" {word} "
        counts.update("g:" + padded[i : i + 3] for i in range(len(padded) - 2))
    if not counts:  # only stop words or punctuation: the text itself is the feature
        counts["t:" + text.strip().casefold()] = 1
    return {
        feature: _WEIGHTS[feature[0]] * (1.0 + math.log(count)) for feature, count in sorted(counts.items())
    }


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return (value >> 1) % dimensions, (1.0 if value & 1 else -1.0)


def embed_text(text: str, dimensions: int, *, normalize: bool = True) -> list[float]:
    """The deterministic vector of ``text`` with ``dimensions`` values (module docstring)."""
    if dimensions < 1:
        raise ValueError("dimensions must be at least 1")
    vector = [0.0] * dimensions
    for feature, weight in features(text).items():
        index, sign = _slot(feature, dimensions)
        vector[index] += sign * weight
    if normalize:
        norm = math.sqrt(math.fsum(v * v for v in vector))
        if norm > 0:
            vector = [v / norm for v in vector]
    return array("f", vector).tolist()  # each value rounded to float32


__all__ = ["count_tokens", "embed_text", "features"]
