"""Knowledge on the AWS host through the Lambda handlers on moto: a document uploaded over the HTTP
API, published, searched by words and by vectors (the OpenAI SDK against ``avm fake-llm`` on
loopback), found by an agent's search tool in the turn worker, invisible to another tenant, and
gone from the bucket with its tenant. The index files live in S3 (``adapters/aws/s3_knowledge.py``);
the local twin is ``tests/unit/resources/test_knowledge_uploads.py``."""

from __future__ import annotations

import base64

import boto3
import pytest

from agentvm.adapters.aws.s3_knowledge import PREFIX, owner_prefix
from agentvm.adapters.llm.scripted import Calls
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.fakellm.vectors import embed_text
from agentvm.hosts.aws import run_sync
from agentvm.ports import DRAFT
from agentvm.resources.indexing import is_indexed
from tests.functions.aws_stack import REGION, Stack, load_event, moto_resources, put_auth_secret

pytestmark = pytest.mark.aws

BUCKET = "agentvm-workspaces-test"
KEY = "sk-fake-EMBED-0123456789abcdef"
HANDBOOK = b"""# Billing

Invoices are sent on the first day of each month.

## Refunds

Refunds are paid back to the original card within five business days.

# Fleet

Staff may purchase a car for client visits with the manager's approval.
"""


@pytest.fixture(scope="module")
def fake_server():
    with FakeLLMServer(FakeLLMConfig()) as server:
        yield server


@pytest.fixture
def stack(monkeypatch, context, push, fake_server):
    fake_server.reset()
    with moto_resources(monkeypatch) as resources:
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        monkeypatch.setenv("AVM_KNOWLEDGE_BUCKET", BUCKET)
        # the server's embedding model: OpenAI's wire, served by the fake on loopback
        monkeypatch.setenv("AVM_EMBEDDINGS_MODEL", "openai/text-embedding-3-small")
        monkeypatch.setenv("AVM_OPENAI_API_KEY", KEY)
        monkeypatch.setenv("AVM_OPENAI_BASE_URL", fake_server.openai_base_url)
        fake_server.configure(embeddings_api_key=KEY)
        yield Stack(resources, context, push)


@pytest.fixture
def keys_in_ssm(monkeypatch, context, push, fake_server):
    """The stack as deployed: the OpenAI key and URL only in the provider-keys SecureString."""
    fake_server.reset()
    with moto_resources(monkeypatch) as resources:
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        keys = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_server.openai_base_url}
        put_auth_secret(keys, name="/agentvm/test/provider-keys")
        for name in ("AVM_OPENAI_API_KEY", "OPENAI_API_KEY", "AVM_OPENAI_BASE_URL", "OPENAI_BASE_URL"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AVM_PROVIDER_KEYS_PARAMETER", "/agentvm/test/provider-keys")
        monkeypatch.setenv("AVM_KNOWLEDGE_BUCKET", BUCKET)
        monkeypatch.setenv("AVM_EMBEDDINGS_MODEL", "openai/text-embedding-3-small")
        fake_server.configure(embeddings_api_key=KEY)
        yield Stack(resources, context, push)


def upload(stack: Stack, token: str, name: str, filename: str, data: bytes) -> tuple[int, dict]:
    """``POST /v1/knowledge/{name}/documents``: the file's bytes as the body, as API Gateway
    delivers a binary body (base64)."""
    import json

    event = load_event("apigw-http-get-health.json")
    path = f"/v1/knowledge/{name}/documents"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["rawQueryString"] = f"filename={filename}"
    event["requestContext"]["http"]["method"] = "POST"
    event["headers"].update(
        {
            "authorization": f"Bearer {token}",
            "content-type": "text/markdown",
            "content-length": str(len(data)),
        }
    )
    event["body"], event["isBase64Encoded"] = base64.b64encode(data).decode(), True
    response = stack.http_api(event, stack.context)
    return response["statusCode"], json.loads(response["body"])


def bucket_keys(prefix: str = PREFIX) -> list[str]:
    answer = boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for o in answer.get("Contents", [])]


def test_an_uploaded_document_is_published_and_found_by_words_and_by_vectors(stack):
    acme = stack.new_key("acme", "admin")
    status, answer = upload(stack, acme, "handbook", "handbook.md", HANDBOOK)
    assert status == 201, answer
    assert answer["draft"]["documents"] == 1
    assert (
        stack.http("GET", "/v1/knowledge/handbook/documents", acme)[1]["documents"][0]["id"] == "handbook.md"
    )
    status, published = stack.http("PUT", "/v1/resources/knowledge/handbook", acme, {"spec": {"draft": True}})
    assert status == 201, published
    assert published["resource"]["chunks"] == 3
    status, found = stack.http(
        "POST",
        "/v1/resources/search",
        acme,
        {"uri": "resource://knowledge/handbook", "query": "refunds card"},
    )
    assert status == 200 and found["mode"] == "hybrid"  # words and vectors, fused
    assert found["hits"][0]["citation"] == "[handbook.md — Billing > Refunds]"
    # by vectors alone: "buy" and "automobile" share no word with the text, only the fake's synonyms
    index = stack.runtimes["http_api"].knowledge_index
    assert index is not None
    assert run_sync(index.search_words("acme", "handbook", "1", "buy automobile", 3)) == []
    query = embed_text("buy automobile", 1536)
    (best, *_) = run_sync(index.search_vectors("acme", "handbook", "1", query, 3))
    assert best.chunk.heading_path == "Fleet"
    status, found = stack.http(
        "POST",
        "/v1/resources/search",
        acme,
        {"uri": "resource://knowledge/handbook", "query": "buy automobile"},
    )
    assert found["hits"][0]["headingPath"] == "Fleet"  # through the search route too (vectors' side)
    version = run_sync(
        stack.runtimes["http_api"].resources.store.get_version("acme", "knowledge", "handbook", "1")
    )
    assert version is not None and is_indexed(version)  # not the record's BM25 offsets
    assert version.index is not None and version.index["embedding"]["dimensions"] == 1536
    # the draft and version 1: one file each, under the tenant's prefix
    assert len(bucket_keys(owner_prefix("acme"))) == 2


def test_an_agent_finds_the_document_through_its_search_tool_in_the_turn_worker(stack):
    acme = stack.new_key("acme", "admin")
    assert upload(stack, acme, "handbook", "handbook.md", HANDBOOK)[0] == 201
    stack.http("PUT", "/v1/resources/knowledge/handbook", acme, {"spec": {"draft": True}})
    agent = {"systemPrompt": "Answer from the handbook.", "knowledge": ["resource://knowledge/handbook@1"]}
    assert (
        stack.http("POST", "/v1/resources", acme, {"kind": "agent", "name": "support", "spec": agent})[0]
        == 201
    )
    stack.connect("c1", headers={"Authorization": f"Bearer {acme}"})
    image = stack.request(
        "c1", "image_create", "r1", containerId="a", config={"agent": "resource://agents/support"}
    )
    stack.model.add(
        Calls(("search_handbook", {"query": "how long do refunds take", "limit": 2})), "Five days."
    )
    stack.request("c1", "message_send", "r2", imageId=image["record"]["imageId"], content="Refunds?")
    stack.run_turns()
    (result,) = stack.model.requests[-1].messages[-1].tool_results
    assert not result.is_error
    assert result.content.startswith("[1] Billing [handbook.md — Billing > Refunds]\nRefunds are paid back")


def test_another_tenant_cannot_see_or_change_the_knowledge(stack):
    acme, other = stack.new_key("acme", "admin"), stack.new_key("other", "admin")
    upload(stack, acme, "handbook", "handbook.md", HANDBOOK)
    stack.http("PUT", "/v1/resources/knowledge/handbook", acme, {"spec": {"draft": True}})
    for path in ("resource://knowledge/handbook", "resource://knowledge/nothing"):
        status, answer = stack.http("POST", "/v1/resources/search", other, {"uri": path, "query": "refunds"})
        assert status == 404, answer
    assert stack.http("GET", "/v1/knowledge/handbook/documents", other)[1]["documents"] == []
    assert stack.http("DELETE", "/v1/knowledge/handbook/documents/handbook.md", other)[0] == 404
    # its own draft of the same name is another file: acme's stays as it was
    assert upload(stack, other, "handbook", "theirs.md", b"The other tenant's plan.")[0] == 201
    index = stack.runtimes["http_api"].knowledge_index
    assert index is not None
    docs = run_sync(index.documents("acme", "handbook", DRAFT))
    assert [d.document_id for d in docs] == ["handbook.md"]
    assert run_sync(index.search_words("other", "handbook", "1", "refunds", 5)) == []


def test_deleting_a_tenant_deletes_its_index_files(stack):
    acme, other = stack.new_key("acme", "admin"), stack.new_key("other", "admin")
    upload(stack, acme, "handbook", "handbook.md", HANDBOOK)
    stack.http("PUT", "/v1/resources/knowledge/handbook", acme, {"spec": {"draft": True}})
    upload(stack, acme, "never-published", "a.md", b"Never published.")
    upload(stack, other, "kb", "b.md", b"The other tenant's plan.")
    assert len(bucket_keys(owner_prefix("acme"))) == 3
    assert run_sync(stack.runtimes["http_api"].resources.delete_tenant("acme")) == 1
    assert bucket_keys() == bucket_keys(owner_prefix("other")) != []


def test_the_embedder_gets_its_provider_key_from_ssm_as_the_models_do(keys_in_ssm):
    stack = keys_in_ssm
    acme = stack.new_key("acme", "admin")
    assert upload(stack, acme, "handbook", "handbook.md", HANDBOOK)[0] == 201
    status, published = stack.http("PUT", "/v1/resources/knowledge/handbook", acme, {"spec": {"draft": True}})
    assert status == 201, published
    status, found = stack.http(
        "POST",
        "/v1/resources/search",
        acme,
        {"uri": "resource://knowledge/handbook", "query": "buy automobile"},
    )
    assert found["mode"] == "hybrid" and found["hits"][0]["headingPath"] == "Fleet"
