"""How a route documents its success answer in ``/openapi.json`` (and so at ``/docs``): ``ok(...)``.

Every operation documents its success response with a schema (a pydantic model, when one is
cheap and clear) and a real example: an answer the route gave in a test, ids and digests included
(``tests/unit/test_openapi_truth.py`` checks that each example validates against its schema and
that the routes really answer those keys). The model documents; it does not filter: routes pass
``response_model=None`` and answer what they build, so a documented model never hides a field.

Errors are documented by ``errors(...)``, which ``api/app.py`` hands to each router (with the
error shape, ``ErrorBody``); request bodies carry their examples on their pydantic models
(``json_schema_extra={"examples": [...]}``) or, for an optional body, on the parameter
(``Body(openapi_examples=...)``).

FastAPI writes ``/openapi.json`` without a single ``null`` (it encodes the document with
``exclude_none``), examples included: ``{"next": null}`` would be documented as ``{}``, a shape the
route never answers. So ``ok(...)`` and ``examples(...)`` (for ``json_schema_extra``) also carry
each example as JSON text (``x-example-json``, ``x-examples-json``), which no encoder touches, and
``restore_examples`` (run by ``api/app.py`` on the finished document) puts them back from it.
"""

from __future__ import annotations

import json
from typing import Any

Responses = dict[int | str, dict[str, Any]]
_ONE, _MANY = "x-example-json", "x-examples-json"


def ok(
    status: int,
    model: Any,
    example: Any,
    text: str,
    *,
    more: dict[str, Any] | None = None,
) -> Responses:
    """The success response as documented: its schema (``model``; ``None``: the route's own
    ``response_model``), a description and an example. ``more``: other answers the route gives
    (name -> example), shown next to ``example`` (named ``default``) in the docs' example menu."""
    media: dict[str, Any] = {"example": example, _ONE: json.dumps(example)}
    if more:
        named = {name: {"value": value} for name, value in {"default": example, **more}.items()}
        media = {"examples": named, _MANY: json.dumps(named)}
    response: dict[str, Any] = {"description": text, "content": {"application/json": media}}
    if model is not None:
        response["model"] = model
    return {status: response}


def examples(*values: Any) -> dict[str, Any]:
    """``json_schema_extra`` of a model: its examples (nulls kept in ``/openapi.json``)."""
    return {"examples": list(values), _MANY: json.dumps(list(values))}


def restore_examples(node: Any) -> None:
    """Put back, everywhere in an OpenAPI document, the examples as written (nulls included)."""
    if isinstance(node, dict):
        if _ONE in node:
            node["example"] = json.loads(node.pop(_ONE))
        if _MANY in node:
            node["examples"] = json.loads(node.pop(_MANY))
        for value in node.values():
            restore_examples(value)
    elif isinstance(node, list):
        for value in node:
            restore_examples(value)


__all__ = ["Responses", "examples", "ok", "restore_examples"]
