"""How a route documents its success answer in ``/openapi.json`` (and so at ``/docs``): ``ok(...)``.

Every operation documents its success response with a schema and a real example: an answer the
route gave in a test, ids and digests included (``tests/unit/api/test_openapi_truth.py`` checks that
each example validates against its schema, and that the routes really answer those keys and fit
those schemas). The schema documents; it does not filter: routes pass ``response_model=None`` and
answer what they build, so a documented model never hides a field.

The schema is named, ``ok(200, "ResourcePage", ...)``: a model of ``agentvm.api.answers``, a
module imported only when the document is built (its ~50 classes would add some 25 ms to the HTTP
Lambda's cold start for nothing a request needs); a model class works too (``api/tenants.py``).

Errors are documented by ``error_responses(...)`` (``api/errors.py``, with the error shape,
``ErrorBody``); request bodies carry their examples on their pydantic models
(``json_schema_extra=examples(...)``) or, for an optional body, on the parameter
(``Body(openapi_examples=...)``).

FastAPI writes ``/openapi.json`` without a single ``null`` (it encodes the document with
``exclude_none``), examples included: ``{"next": null}`` would be documented as ``{}``, a shape the
route never answers. So ``ok(...)`` and ``examples(...)`` also carry each example as JSON text
(``x-example-json``, ``x-examples-json``), which no encoder touches, and ``finish_document`` (run by
``openapi_document``, the app's ``openapi()``, on the finished document) puts them back from it.

What only the server's settings tell (a request body's ``maxLength``: the server's
``AVM_MAX_BODY_BYTES``) a route states with ``BODY_LIMIT`` in its schema, which ``finish_document``
replaces with the value: routes are declared at import, before any runtime exists. Likewise
``FILE_LIMIT``: a knowledge upload's ``AVM_KNOWLEDGE_MAX_FILE_BYTES``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

Responses = dict[int | str, dict[str, Any]]
_ONE, _MANY, _MODEL = "x-example-json", "x-examples-json", "x-answer-model"
_REF = "#/components/schemas/{model}"
_BODY_LIMIT = "x-max-body-bytes"
BODY_LIMIT = {_BODY_LIMIT: True}  # in a schema: ``maxLength``, the server's body limit (bytes)
_FILE_LIMIT = "x-max-file-bytes"
FILE_LIMIT = {_FILE_LIMIT: True}  # in a schema: ``maxLength``, the per-file limit of knowledge uploads


def ok(
    status: int,
    model: Any,
    example: Any,
    text: str,
    *,
    more: dict[str, Any] | None = None,
) -> Responses:
    """The success response as documented: its schema (``model``: the name of a model of
    ``agentvm.api.answers``, a model class, or ``None`` for the route's own ``response_model``), a
    description and an example. ``more``: other answers the route gives (name -> example), shown
    next to ``example`` (named ``default``) in the docs' example menu."""
    media: dict[str, Any] = {"example": example, _ONE: json.dumps(example)}
    if more:
        named = {name: {"value": value} for name, value in {"default": example, **more}.items()}
        media = {"examples": named, _MANY: json.dumps(named)}
    response: dict[str, Any] = {"description": text, "content": {"application/json": media}}
    if isinstance(model, str):
        media[_MODEL] = model
    elif model is not None:
        response["model"] = model
    return {status: response}


def error_examples(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``content`` of an error response: its example answers (named by their code when several)."""
    if not answers:
        return {}
    if len(answers) == 1:
        return {"content": {"application/json": {"example": answers[0]}}}
    named = {a["error"]["code"]: {"value": a} for a in answers}
    return {"content": {"application/json": {"examples": named}}}


def examples(*values: Any) -> dict[str, Any]:
    """``json_schema_extra`` of a model: its examples (nulls kept in ``/openapi.json``)."""
    return {"examples": list(values), _MANY: json.dumps(list(values))}


def stated(**bounds: Any) -> Any:
    """A bound the code checks itself, with its own error code (``invalid_locator``,
    ``invalid_config``, ...), stated in the schema: ``Annotated[str, stated(maxLength=256)]``.
    Pydantic does not check it a second time, so a refusal keeps the code's error; a bound nothing
    else enforces is declared as usual (``Field(max_length=...)``, ``Query(max_length=...)``)."""
    from pydantic import Field

    return Field(json_schema_extra=bounds)


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The app's ``openapi()``: FastAPI's document, finished once. FastAPI documents a 422 on every
    route with parameters; ours answer validation errors 400."""
    from fastapi import FastAPI

    if app.openapi_schema is None:
        schema = FastAPI.openapi(app)  # cached on the app: edited in place, once
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        runtime = app.state.runtime
        finish_document(
            schema,
            max_body_bytes=runtime.turns.max_body_bytes,
            max_file_bytes=runtime.knowledge_limits.max_file_bytes,
        )
    return app.openapi_schema  # type: ignore[return-value]


def finish_document(schema: dict[str, Any], *, max_body_bytes: int, max_file_bytes: int = 0) -> None:
    """Complete an OpenAPI document FastAPI made: the schemas of the answers named by ``ok(...)``
    (in ``components``), every example as written (nulls included), and the body limit where
    ``BODY_LIMIT`` stands."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    _finish(schema, components, max_body_bytes, max_file_bytes)


def _finish(node: Any, components: dict[str, Any], max_body_bytes: int = 0, max_file_bytes: int = 0) -> None:
    if isinstance(node, dict):
        if node.pop(_BODY_LIMIT, None):
            node["maxLength"] = max_body_bytes
        if node.pop(_FILE_LIMIT, None):
            node["maxLength"] = max_file_bytes
        if _ONE in node:
            node["example"] = json.loads(node.pop(_ONE))
        if _MANY in node:
            node["examples"] = json.loads(node.pop(_MANY))
        if _MODEL in node:
            node["schema"] = _answer_schema(node.pop(_MODEL), components)
        for value in list(node.values()):
            _finish(value, components, max_body_bytes, max_file_bytes)
    elif isinstance(node, list):
        for value in node:
            _finish(value, components, max_body_bytes, max_file_bytes)


def _answer_schema(name: str, components: dict[str, Any]) -> dict[str, Any]:
    """The schema of ``agentvm.api.answers.<name>``, its models added to ``components``."""
    from pydantic import BaseModel, TypeAdapter

    from agentvm.api import answers

    answer = getattr(answers, name)
    schema = TypeAdapter(answer).json_schema(mode="serialization", ref_template=_REF)
    defs = schema.pop("$defs", {})
    if isinstance(answer, type) and issubclass(answer, BaseModel):
        defs[answer.__name__] = schema
        schema = {"$ref": _REF.format(model=answer.__name__)}
    for model, part in defs.items():
        _finish(part, components)  # their examples(...)
        if components.setdefault(model, part) != part:
            raise ValueError(f"two schemas named {model} in the OpenAPI document: rename one")
    return schema


__all__ = [
    "BODY_LIMIT",
    "FILE_LIMIT",
    "Responses",
    "error_examples",
    "examples",
    "finish_document",
    "ok",
    "openapi_document",
    "stated",
]
