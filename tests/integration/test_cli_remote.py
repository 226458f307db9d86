"""``avm resources``, ``avm config`` and ``avm tenants`` against a real ``avm serve`` (a subprocess
on loopback): the commands speak the HTTP routes with an API key, print the answers as JSON, and
report errors with their code and exit status 1. The server reads ``<data dir>/config.json`` at
start."""

from __future__ import annotations

import json

import pytest

from agentvm.cli.main import main
from agentvm.security.apikeys import new_token
from tests.integration.avm_process import avm_serve, base_env, free_port

_, ADMIN = new_token()


@pytest.fixture
def server(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.json").write_text(json.dumps({"turns": {"deadlineS": 120}}))
    env = base_env(AVM_ADMIN_KEY=ADMIN, AVM_PLATFORM_TENANT="default")
    with avm_serve(data, free_port(), env=env) as s:
        yield s


def run(capsys, server, *argv: str) -> tuple[int, object]:
    code = main([*argv, "--url", server.http, "--key", ADMIN])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else err


def test_resources_are_published_listed_tagged_rendered_searched_resolved_and_deleted_from_the_command_line(
    server, capsys, tmp_path
):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"template": "Hello {{who}}", "variables": {"who": {"type": "string"}}}))
    code, published = run(
        capsys,
        server,
        "resources",
        "publish",
        "--kind",
        "prompt",
        "--name",
        "hi",
        "--spec",
        str(spec),
        "--tag",
        "stable",
    )
    assert code == 0 and published["resource"]["uri"] == "resource://prompts/hi@1"
    code, listed = run(capsys, server, "resources", "list", "--kind", "prompt")
    assert [r["name"] for r in listed["resources"]] == ["hi"] and listed["resources"][0]["tags"] == {
        "stable": "1"
    }
    code, rendered = run(
        capsys, server, "resources", "render", "resource://prompts/hi@stable", "--arg", "who=Ada"
    )
    assert rendered == {"uri": "resource://prompts/hi@1", "text": "Hello Ada"}
    code, error = run(capsys, server, "resources", "render", "resource://prompts/hi", "--arg", "who=3")
    assert code == 1 and "invalid_resource" in error and "arguments.who" in error
    code, error = run(capsys, server, "resources", "get", "prompts/hi")
    assert code == 2 and "not a resource URI" in error
    code, tagged = run(capsys, server, "resources", "tag", "resource://prompts/hi@1", "prod")
    assert tagged["resource"]["tags"] == {"stable": "1", "prod": "1"}
    code, one = run(capsys, server, "resources", "get", "resource://prompts/hi@prod")
    assert (
        one["resource"]["uri"] == "resource://prompts/hi@1"
        and one["resource"]["spec"]["template"] == "Hello {{who}}"
    )
    docs = tmp_path / "kb.json"
    docs.write_text(
        json.dumps(
            {
                "documents": [
                    {"id": "refunds", "title": "Refunds", "text": "Refunds are paid within 14 days."},
                    {"id": "shipping", "title": "Shipping", "text": "Orders ship in 2 days."},
                ]
            }
        )
    )
    code, _ = run(
        capsys, server, "resources", "publish", "--kind", "knowledge", "--name", "kb", "--spec", str(docs)
    )
    assert code == 0
    code, found = run(
        capsys, server, "resources", "search", "resource://knowledge/kb", "refund", "--limit", "1"
    )
    assert [h["documentId"] for h in found["hits"]] == ["refunds"]
    agent = tmp_path / "agent.json"
    agent.write_text(
        json.dumps(
            {
                "prompt": {"uri": "resource://prompts/hi@prod", "arguments": {"who": "Ada"}},
                "knowledge": ["resource://knowledge/kb@1"],
            }
        )
    )
    code, _ = run(
        capsys, server, "resources", "publish", "--kind", "agent", "--name", "a", "--spec", str(agent)
    )
    code, resolved = run(capsys, server, "resources", "resolve", "resource://agents/a")
    assert sorted(v["uri"] for v in resolved["dependencies"].values()) == [
        "resource://knowledge/kb@1",
        "resource://prompts/hi@1",
    ]
    code, error = run(capsys, server, "resources", "delete", "resource://prompts/hi")
    assert code == 1 and "resource_in_use" in error  # the agent needs it
    code, _ = run(capsys, server, "resources", "delete", "resource://agents/a")
    assert code == 0
    code, deleted = run(capsys, server, "resources", "delete", "resource://prompts/hi")
    assert deleted == {"deleted": ["resource://prompts/hi@1"]}


def test_settings_are_shown_with_their_source_set_audited_and_refused_by_key(server, capsys):
    code, entry = run(capsys, server, "config", "get", "turns.deadlineS")
    assert code == 0 and (entry["value"], entry["source"]) == (120.0, "file")
    code, entry = run(capsys, server, "config", "set", "llm.maxOutputTokens", "333")
    assert (entry["value"], entry["source"]) == (333, "tenant")
    code, entry = run(
        capsys, server, "config", "set", "llm.openai.apiKey", "sk-cli-secret-42", "--scope", "server"
    )
    assert entry["value"] == "********"
    code, audit = run(capsys, server, "config", "audit", "--scope", "server")
    assert [c["new"] for c in audit["changes"]] == ["********"]
    code, error = run(capsys, server, "config", "set", "llm.nope", "1")
    assert code == 1 and "invalid_config" in error and "llm.nope" in error
    code, shown = run(capsys, server, "config", "show")
    assert "sk-cli-secret-42" not in json.dumps(shown)
    assert "sk-cli-secret-42" not in server.output()


def test_tenants_are_managed_from_the_command_line_by_a_platform_admin(server, capsys):
    code, made = run(capsys, server, "tenants", "create", "--name", "Acme", "--tenant-id", "acme")
    assert code == 0 and made["tenantId"] == "acme" and made["status"] == "active"
    code, other = run(capsys, server, "tenants", "create", "--name", "Globex", "--description", "d")
    assert other["tenantId"].startswith("tenant_") and other["description"] == "d"
    code, changed = run(capsys, server, "tenants", "update", "acme", "--description", "first")
    assert changed["description"] == "first"
    code, cleared = run(capsys, server, "tenants", "update", other["tenantId"], "--remove-description")
    assert "description" not in cleared
    code, error = run(capsys, server, "tenants", "update", "acme")
    assert code == 2 and "--name" in error
    code, page = run(capsys, server, "tenants", "list", "--limit", "1")
    assert [t["tenantId"] for t in page["tenants"]] == ["acme"] and page["next"] == "acme"
    code, rest = run(capsys, server, "tenants", "list", "--limit", "1", "--cursor", page["next"])
    assert rest == {"tenants": [cleared], "next": None}
    code, gone = run(capsys, server, "tenants", "delete", "acme")
    assert gone["deleted"] is True and gone["conversations"] == "purged"
    code, error = run(capsys, server, "tenants", "get", "acme")
    assert code == 1 and "not_found" in error
    code, tombstones = run(capsys, server, "tenants", "list", "--status", "deleted")
    assert [t["tenantId"] for t in tombstones["tenants"]] == ["acme"]
    code, error = run(capsys, server, "tenants", "delete", "default")  # the platform tenant here
    assert code == 1 and "conflict" in error


def test_documents_are_uploaded_listed_removed_and_published_from_the_command_line(server, capsys, tmp_path):
    from tests import knowledge_files

    guide = tmp_path / "guide.docx"
    guide.write_bytes(knowledge_files.docx())
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe office opens at nine.")
    code = main(["resources", "upload", "kb", str(guide), str(notes), "--url", server.http, "--key", ADMIN])
    out, _ = capsys.readouterr()
    # one JSON answer per file, one after the other (top-level braces at the line start)
    answers = [json.loads(part) for part in out.replace("\n}\n{", "\n}\x00{").split("\x00")]
    assert code == 0 and [(a["document"]["id"], a["document"]["type"]) for a in answers] == [
        ("guide.docx", "docx"),
        ("notes.md", "markdown"),
    ]
    code, listed = run(capsys, server, "resources", "documents", "kb")
    assert [d["id"] for d in listed["documents"]] == ["guide.docx", "notes.md"]
    code, removed = run(capsys, server, "resources", "remove-document", "kb", "notes.md")
    assert removed == {"deleted": "notes.md"}
    code, published = run(capsys, server, "resources", "publish-draft", "kb", "--tag", "stable")
    assert published["resource"]["uri"] == "resource://knowledge/kb@1"
    assert [u["id"] for u in published["resource"]["spec"]["uploads"]] == ["guide.docx"]
    code, found = run(
        capsys, server, "resources", "search", "resource://knowledge/kb@stable", "refund window"
    )
    assert found["mode"] == "words" and found["hits"][0]["citation"] == "[guide.docx — Billing > Refunds]"
    bad = tmp_path / "photo.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0")
    code, error = run(capsys, server, "resources", "upload", "kb", str(bad))
    assert code == 1 and "unsupported_document_type" in error
