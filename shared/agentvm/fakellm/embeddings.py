"""The fake provider's embedding endpoints, in each provider's wire format (vectors: ``vectors.py``).

* OpenAI ``POST /v1/embeddings``: ``input`` a string or a list of up to 2,048 (strings, or token
  id lists), ``encoding_format`` ``float`` or ``base64`` (little-endian float32, what the SDK asks
  for by default), ``dimensions`` (text-embedding-3 only, 1 to the model's size); ``usage``
  ``prompt_tokens`` = ``total_tokens``. Refused as OpenAI refuses: an unknown model (404
  ``model_not_found``), an empty string or too many inputs (400), an input over 8,192 tokens or a
  request over 300,000 (400), ``dimensions`` on ada-002 or out of range (400).
* Bedrock ``InvokeModel`` (``POST /model/{modelId}/invoke``): Titan Text Embeddings v2
  (``inputText``, ``dimensions`` 256/512/1024, ``normalize``, ``embeddingTypes``; answers
  ``embedding``, ``embeddingsByType``, ``inputTextTokenCount``), Titan v1 (``inputText`` only,
  1,536 values) and Cohere Embed v3 (``texts`` up to 96, ``input_type``, ``embedding_types``;
  answers ``embeddings``, ``id``, ``response_type``, ``texts``). Every answer carries the
  ``X-Amzn-Bedrock-Input-Token-Count`` header, as Bedrock's does. An unknown model or a bad body
  is a 400 ``ValidationException``.

Keys: with the config's ``embeddings_api_key`` set, these endpoints refuse any other key as the
provider does (OpenAI 401 ``invalid_api_key``; Bedrock 403 ``UnrecognizedClientException``, matched against
the SigV4 access key id, the signature itself is not checked). Unset, any key is accepted. The
faults (``/_fake/faults``: 429, 500, overloaded) apply to these requests too; scripted replies
(``/_fake/script``) are left for the chat requests.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import uuid
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from agentvm.fakellm.vectors import count_tokens, embed_text
from agentvm.fakellm.wire import BedrockWire, OpenAIWire

if TYPE_CHECKING:
    from starlette.requests import Request

    from agentvm.fakellm.state import FakeLLMState

# OpenAI: model -> (its size, whether ``dimensions`` may shorten it)
OPENAI_MODELS = {
    "text-embedding-3-small": (1536, True),
    "text-embedding-3-large": (3072, True),
    "text-embedding-ada-002": (1536, False),
}
OPENAI_MAX_INPUTS = 2048
OPENAI_MAX_INPUT_TOKENS = 8192
OPENAI_MAX_REQUEST_TOKENS = 300_000

TITAN_V2 = "amazon.titan-embed-text-v2:0"
TITAN_V1 = "amazon.titan-embed-text-v1"
COHERE_MODELS = ("cohere.embed-english-v3", "cohere.embed-multilingual-v3")
TITAN_V2_DIMENSIONS = (256, 512, 1024)
TITAN_MAX_CHARS = 50_000
TITAN_MAX_TOKENS = 8192
COHERE_MAX_TEXTS = 96
COHERE_MAX_CHARS = 2048
COHERE_INPUT_TYPES = ("search_document", "search_query", "classification", "clustering")

_SIGV4_KEY = re.compile(r"Credential=([^/,\s]+)/")


class Refused(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def _openai_refusal(exc: Refused) -> JSONResponse:
    error = {"message": exc.message, "type": "invalid_request_error", "param": None, "code": exc.code}
    return JSONResponse({"error": error}, status_code=exc.status)


def _bedrock_refusal(exc: Refused) -> JSONResponse:
    return JSONResponse(
        {"message": exc.message},
        status_code=exc.status,
        headers={"x-amzn-ErrorType": exc.code or "ValidationException"},
    )


async def _json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _fault_reply(
    state: FakeLLMState, body: dict[str, Any], wire: OpenAIWire | BedrockWire
) -> JSONResponse | None:
    """Count the request; the next queued fault (429, 500, overloaded) as the provider answers it."""
    fault = state.begin_embedding(body)
    if fault is None or fault.kind not in ("429", "500", "overloaded"):
        return None
    error = wire.error(fault.kind, fault.retry_after)
    return JSONResponse(error.body, status_code=error.status, headers=error.headers)


# -- OpenAI -------------------------------------------------------------------------------------


def _openai_inputs(raw: object) -> list[str]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise Refused(400, "'$.input' is invalid. Please check the API reference.")
    if all(isinstance(t, int) and not isinstance(t, bool) for t in raw):
        raw = [raw]  # one text as token ids
    if len(raw) > OPENAI_MAX_INPUTS:
        raise Refused(400, f"'$.input' is invalid: at most {OPENAI_MAX_INPUTS} inputs per request.")
    texts = []
    for item in raw:
        if isinstance(item, str) and item:
            texts.append(item)
        elif isinstance(item, list) and item and all(isinstance(t, int) for t in item):
            texts.append(" ".join(f"t{t}" for t in item))  # token ids: one word each
        else:
            raise Refused(400, "'$.input' is invalid. Please check the API reference.")
    return texts


def _openai_dimensions(body: dict[str, Any], model: str) -> int:
    size, shortens = OPENAI_MODELS[model]
    asked = body.get("dimensions")
    if asked is None:
        return size
    if not shortens:
        raise Refused(400, "This model does not support specifying dimensions.")
    if not isinstance(asked, int) or isinstance(asked, bool) or not 1 <= asked <= size:
        raise Refused(400, f"Invalid value for 'dimensions' = {asked}. Must be between 1 and {size}.")
    return asked


def _openai_key_refused(request: Request, state: FakeLLMState) -> Refused | None:
    wanted = state.config.embeddings_api_key
    if wanted is None or request.headers.get("authorization", "") == f"Bearer {wanted}":
        return None
    return Refused(401, "Incorrect API key provided.", "invalid_api_key")


def _encode(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return vector


async def openai_embeddings(request: Request) -> JSONResponse:
    state: FakeLLMState = request.app.state.fake
    body = await _json_body(request)
    if body is None:
        return _openai_refusal(Refused(400, "We could not parse the JSON body of your request."))
    model = str(body.get("model", ""))
    faulted = _fault_reply(state, body, OpenAIWire(model, 0, False))
    try:
        refused = _openai_key_refused(request, state)
        if refused is not None:
            raise refused
        if faulted is not None:
            return faulted
        if model not in OPENAI_MODELS:
            raise Refused(
                404, f"The model `{model}` does not exist or you do not have access to it.", "model_not_found"
            )
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise Refused(400, f"Invalid value for 'encoding_format' = {encoding}. Use float or base64.")
        texts = _openai_inputs(body.get("input"))
        dimensions = _openai_dimensions(body, model)
        tokens = [count_tokens(t) for t in texts]
        for n in tokens:
            if n > OPENAI_MAX_INPUT_TOKENS:
                raise Refused(
                    400,
                    f"This model's maximum context length is {OPENAI_MAX_INPUT_TOKENS} tokens, however you "
                    f"requested {n} tokens ({n} in your prompt; 0 for the completion). Please reduce your "
                    "prompt; or completion length.",
                )
        if sum(tokens) > OPENAI_MAX_REQUEST_TOKENS:
            raise Refused(
                400, f"Requested {sum(tokens)} tokens, max {OPENAI_MAX_REQUEST_TOKENS} tokens per request"
            )
    except Refused as exc:
        return _openai_refusal(exc)
    data = [
        {"object": "embedding", "index": i, "embedding": _encode(embed_text(t, dimensions), encoding)}
        for i, t in enumerate(texts)
    ]
    state.count("completed")
    usage = {"prompt_tokens": sum(tokens), "total_tokens": sum(tokens)}
    return JSONResponse({"object": "list", "data": data, "model": model, "usage": usage})


# -- Bedrock ------------------------------------------------------------------------------------


def _extraneous(body: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(body) - allowed - {"modelId"})
    if extra:
        raise Refused(
            400,
            f"Malformed input request: #: extraneous key [{extra[0]}] is not permitted, please reformat "
            "your input and try again.",
        )


def _titan_text(body: dict[str, Any]) -> str:
    text = body.get("inputText")
    if not isinstance(text, str) or not text:
        raise Refused(
            400, "Malformed input request: #/inputText: expected minLength: 1, please reformat your input."
        )
    if len(text) > TITAN_MAX_CHARS:
        raise Refused(400, f"Malformed input request: #/inputText: expected maxLength: {TITAN_MAX_CHARS}.")
    if count_tokens(text) > TITAN_MAX_TOKENS:
        raise Refused(400, f"Too many input tokens. Max input tokens: {TITAN_MAX_TOKENS}.")
    return text


def _titan_v2(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    _extraneous(body, {"inputText", "dimensions", "normalize", "embeddingTypes"})
    text = _titan_text(body)
    dimensions = body.get("dimensions", 1024)
    if dimensions not in TITAN_V2_DIMENSIONS:
        raise Refused(400, f"Malformed input request: #/dimensions: {dimensions} is not a valid enum value.")
    normalize = body.get("normalize", True)
    if not isinstance(normalize, bool):
        raise Refused(400, "Malformed input request: #/normalize: expected type: Boolean.")
    types = body.get("embeddingTypes", ["float"])
    if not isinstance(types, list) or not types or any(t not in ("float", "binary") for t in types):
        raise Refused(400, "Malformed input request: #/embeddingTypes: expected float or binary.")
    vector = embed_text(text, dimensions, normalize=normalize)
    by_type: dict[str, Any] = {}
    if "float" in types:
        by_type["float"] = vector
    if "binary" in types:
        by_type["binary"] = [1 if v > 0 else 0 for v in vector]
    tokens = count_tokens(text)
    answer = {"embedding": by_type.get("float"), "embeddingsByType": by_type, "inputTextTokenCount": tokens}
    return answer, tokens


def _titan_v1(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    _extraneous(body, {"inputText"})
    text = _titan_text(body)
    tokens = count_tokens(text)
    return {"embedding": embed_text(text, 1536), "inputTextTokenCount": tokens}, tokens


def _cohere(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    _extraneous(body, {"texts", "input_type", "truncate", "embedding_types", "images"})
    texts = body.get("texts")
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise Refused(400, "Malformed input request: #/texts: expected a non-empty list of strings.")
    if len(texts) > COHERE_MAX_TEXTS:
        raise Refused(400, f"Malformed input request: #/texts: expected maxItems: {COHERE_MAX_TEXTS}.")
    if body.get("input_type") not in COHERE_INPUT_TYPES:
        raise Refused(400, "Malformed input request: #/input_type: not a valid enum value.")
    truncate = body.get("truncate", "NONE")
    if truncate not in ("NONE", "START", "END"):
        raise Refused(400, "Malformed input request: #/truncate: not a valid enum value.")
    if truncate == "NONE" and any(len(t) > COHERE_MAX_CHARS for t in texts):
        raise Refused(400, f"Malformed input request: #/texts: expected maxLength: {COHERE_MAX_CHARS}.")
    texts = [t[:COHERE_MAX_CHARS] if truncate == "END" else t[-COHERE_MAX_CHARS:] for t in texts]
    vectors = [embed_text(t, 1024) for t in texts]
    types = body.get("embedding_types")
    answer: dict[str, Any] = {"id": str(uuid.uuid4()), "texts": texts}
    if types is None:
        answer.update(embeddings=vectors, response_type="embeddings_floats")
    elif types == ["float"]:
        answer.update(embeddings={"float": vectors}, response_type="embeddings_by_type")
    else:
        raise Refused(400, "Malformed input request: #/embedding_types: the fake serves float only.")
    return answer, sum(count_tokens(t) for t in texts)


_BEDROCK_MODELS = {TITAN_V2: _titan_v2, TITAN_V1: _titan_v1} | dict.fromkeys(COHERE_MODELS, _cohere)


def _bedrock_key_refused(request: Request, state: FakeLLMState) -> Refused | None:
    wanted = state.config.embeddings_api_key
    if wanted is None:
        return None
    found = _SIGV4_KEY.search(request.headers.get("authorization", ""))
    if found is not None and found.group(1) == wanted:
        return None
    return Refused(
        403, "The security token included in the request is invalid.", "UnrecognizedClientException"
    )


async def bedrock_invoke_model(request: Request) -> JSONResponse:
    """Bedrock ``InvokeModel`` for the embedding models above (boto3 ``invoke_model``)."""
    state: FakeLLMState = request.app.state.fake
    model = request.path_params["model_id"]
    body = await _json_body(request)
    faulted = _fault_reply(state, {**(body or {}), "modelId": model}, BedrockWire(model, 0))
    try:
        refused = _bedrock_key_refused(request, state)
        if refused is not None:
            raise refused
        if faulted is not None:
            return faulted
        answer_for = _BEDROCK_MODELS.get(model)
        if answer_for is None:
            raise Refused(400, "The provided model identifier is invalid.")
        if body is None:
            raise Refused(400, "Malformed input request, please reformat your input and try again.")
        answer, tokens = answer_for(body)
    except Refused as exc:
        return _bedrock_refusal(exc)
    state.count("completed")
    return JSONResponse(answer, headers={"X-Amzn-Bedrock-Input-Token-Count": str(tokens)})


__all__ = ["OPENAI_MODELS", "TITAN_V1", "TITAN_V2", "bedrock_invoke_model", "openai_embeddings"]
