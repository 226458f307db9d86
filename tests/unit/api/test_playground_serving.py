"""``avm serve`` serves the web playground at ``/``: its files, with no key and a strict
Content-Security-Policy, without shadowing ``/health``, ``/docs``, ``/openapi.json`` or ``/v1``;
nothing but the listed files is reachable; the page renders no server text as HTML; and the
package ships every file (``pip install``)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import httpx
import pytest

from agentvm.api.app import create_app
from agentvm.api.playground import FILES, content_security_policy
from agentvm.config import Settings
from agentvm.hosts.local import local_runtime, local_security
from agentvm.hosts.local_server import create_local_app
from tests.integration.avm_process import TOKEN_RE

ROOT = Path(__file__).resolve().parents[3]
PLAYGROUND = resources.files("agentvm") / "playground"


@pytest.fixture
def host(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path)
    served = local_runtime(settings)
    local_security(settings, served.runtime.clock).attach(served.runtime)
    yield served
    served.queue.close()
    served.runtime.store.close()


@pytest.fixture
async def http(host):
    transport = httpx.ASGITransport(app=create_local_app(host))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
        yield client


def directives(policy: str) -> dict[str, str]:
    return {part.split()[0]: " ".join(part.split()[1:]) for part in policy.split(";") if part.strip()}


async def test_the_page_and_its_files_are_served_without_a_key_under_a_strict_policy(http):
    page = await http.get("/")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="app.js"></script>' in page.text
    for name, media_type in FILES.items():
        answer = await http.get(f"/{name}")
        assert answer.status_code == 200, name
        assert answer.headers["content-type"].startswith(media_type.split(";")[0]), name
        assert answer.content == (PLAYGROUND / name).read_bytes()
        policy = directives(answer.headers["content-security-policy"])
        assert policy["default-src"] == "'none'" and policy["script-src"] == "'self'", name
        assert policy["style-src"] == "'self'" and policy["frame-ancestors"] == "'none'"
        assert policy["connect-src"] == "'self' ws://127.0.0.1:8080"  # this origin and its WebSocket
        assert policy["base-uri"] == "'none'" and policy["form-action"] == "'none'"
        assert "unsafe" not in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["referrer-policy"] == "no-referrer"
    assert (await http.head("/")).status_code == 200


def test_the_policy_names_only_a_well_formed_host_as_the_websocket_origin():
    assert "connect-src 'self' wss://avm.example.com;" in content_security_policy(
        "avm.example.com", secure=True
    )
    assert "connect-src 'self' ws://[::1]:8080;" in content_security_policy("[::1]:8080", secure=False)
    for hostile in ("evil.com; script-src *", "a b", "x'y", "", None):
        assert "connect-src 'self';" in content_security_policy(hostile, secure=False), hostile


async def test_health_docs_openapi_and_v1_behave_as_before(http):
    assert (await http.get("/health")).json()["status"] == "ok"
    docs = await http.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    assert "content-security-policy" not in docs.headers  # the page's policy is the page's only
    schema = (await http.get("/openapi.json")).json()
    assert "/" not in schema["paths"] and not any(
        p.endswith((".js", ".html", ".css")) for p in schema["paths"]
    )
    refused = await http.get("/v1/usage")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert (await http.get("/v1/nope")).json() == {"error": {"code": "not_found", "message": "Not Found"}}


@pytest.mark.parametrize(
    "path",
    [
        "/nope.js",
        "/playground/app.js",
        "/..%2fpyproject.toml",
        "/%2e%2e/%2e%2e/pyproject.toml",
        "/app.js/x",
        "/py.typed",
        "/__init__.py",
        "/index.htm",
    ],
)
async def test_nothing_but_the_listed_files_is_reachable(http, path):
    answer = await http.get(path)
    assert answer.status_code == 404, path
    assert answer.json()["error"]["code"] == "not_found"


async def test_the_aws_http_api_does_not_serve_the_page(harness):
    """On AWS the same files are static files next to the stack (docs/playground.md)."""
    transport = httpx.ASGITransport(app=create_app(harness.rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://avm") as client:
        assert (await client.get("/")).status_code == 404


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text += data


def test_the_page_has_no_inline_script_style_or_handlers_and_holds_no_secret():
    parser = _Tags()
    parser.feed((PLAYGROUND / "index.html").read_text())
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert scripts and all(a.get("src") and a.get("type") == "module" for a in scripts)
    assert parser.script_text.strip() == ""
    for tag, attrs in parser.tags:
        assert "style" not in attrs, tag
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert tag != "style"
    for name in FILES:
        assert not TOKEN_RE.search((PLAYGROUND / name).read_text()), name


VENDORED = ("marked.esm.js", "purify.es.js")  # marked and DOMPurify, as published (docs/playground.md)


def test_the_scripts_never_render_server_text_as_html_and_keep_the_key_out_of_urls():
    for name in (n for n in FILES if n.endswith(".js") and n not in VENDORED):
        source = (PLAYGROUND / name).read_text()
        if name == "view.js":  # the one sink: a reply's Markdown, always through DOMPurify
            assert source.count("innerHTML") == 1 and "node.innerHTML = markdown(text);" in source
            assert "return DOMPurify.sanitize(html);" in source
            source = source.replace("node.innerHTML = markdown(text);", "")
        for sink in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ):
            assert sink not in source, (name, sink)
        assert not re.search(r"token=|localStorage", source), name  # sessionStorage only; never ?token=


def test_the_package_ships_every_playground_file():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["agentvm"]
    shipped = sorted(p.name for p in (ROOT / "shared" / "agentvm" / "playground").iterdir())
    served = [n for n in shipped if not n.startswith("LICENSE.")]  # the vendored scripts' licences
    assert sorted(FILES) == served  # every file is served, and every served file exists
    for name in shipped:
        assert any(fnmatch.fnmatch(f"playground/{name}", pattern) for pattern in patterns), name
