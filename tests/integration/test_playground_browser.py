"""The web playground, end to end: Debian's Chromium, driven by Playwright, against a real
``avm serve`` (echo model, a temp data dir), through the page's own buttons and forms.

A user signs in with the admin key the server printed, creates a container and an image, sees a
reply stream in, runs a tool turn, reloads and finds the history; stops a slow reply; approves a
tool call (also after a reload while the turn waits); answers an MCP server's question in a form;
keeps a reply whole across a dropped
WebSocket (the page resumes from its last seq). Screenshots of these states go to
``.artifacts/playground/`` (gitignored; docs/img holds copies for docs/playground.md).

The browser is Debian's ``chromium`` (``./dev`` installs it when apt-get can run); Playwright is
the ``playwright`` wheel of the dev extra, used with ``executable_path``: its own browser download
is never run. If either is missing the module is skipped, loudly (a warning in the summary).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import httpx
import pytest

from tests.integration.avm_process import avm_serve, base_env, free_port

# CHROMIUM_PATH: another Chromium build (e.g. Ubuntu's chromium-browser); else Debian's.
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
_missing = [
    what
    for what, present in (
        (
            "Debian's chromium (apt-get install chromium; ./dev installs it when it can)",
            Path(CHROMIUM).exists(),
        ),
        (
            "the playwright package (pip install -e '.[dev]')",
            importlib.util.find_spec("playwright") is not None,
        ),
    )
    if not present
]
if _missing:
    _reason = "PLAYGROUND BROWSER TEST SKIPPED: missing " + " and ".join(_missing)
    warnings.warn(_reason, stacklevel=1)  # listed in the summary of every run, -q included
    pytest.skip(_reason, allow_module_level=True)

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

# The flags that work in this sandboxed, offline environment (no GPU, no sandbox as root, no
# background calls to Google's hosts).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts" / "playground"
WAIT_MS = 20_000
# Slow enough that a reply visibly streams, and can be stopped or cut mid-way.
ENV = {
    "AVM_ECHO_DELAY_MS": "100",
    "AVM_FLUSH_MS": "50",
    "AVM_BATCH_FLUSH_MS": "50",
    "AVM_MCP_LIST_DEADLINE_S": "30",  # a busy machine starts an npm MCP server slowly
}
LONG = " ".join(f"word{i}" for i in range(30))  # ~3 s of echo
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with avm_serve(tmp_path_factory.mktemp("avm"), free_port(), env=base_env(**ENV)) as running:
        yield running


@pytest.fixture(scope="module")
def browser():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh tab (its own sessionStorage); fails the test on a script error or a CSP violation."""
    context = browser.new_context(viewport={"width": 1200, "height": 760})
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on(
        "console",
        lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None,
    )
    tab.problems = problems  # a test that expects one removes it
    yield tab
    context.close()
    assert problems == []


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def sign_in(page: Page, server, key: str | None = None) -> None:
    page.goto(server.http + "/")
    expect(page.get_by_label("WebSocket URL")).to_have_value(server.url)  # prefilled from the origin
    expect(page.get_by_label("HTTP API URL")).to_have_value(server.http)
    page.get_by_label("API key").fill(key or server.admin_token())
    page.get_by_role("button", name="Sign in").click()


def open_new_image(page: Page, container: str, *, approval: bool = False) -> None:
    """Signed in: create ``container`` and an image in it (calculator, as the form proposes)."""
    expect(page.locator("#workspace")).to_be_visible()
    page.get_by_label("New container id").fill(container)
    page.get_by_role("button", name="Create container").click()
    expect(page.get_by_label("Container", exact=True)).to_have_value(container)
    expect(page.get_by_role("button", name="Create image")).to_be_visible()
    if approval:
        page.get_by_label("Ask me before running a tool").check()
    page.get_by_role("button", name="Create image").click()
    expect(page.get_by_label("Image", exact=True)).to_have_value(re.compile(r"^img_"))
    expect(page.locator("#transcript")).to_be_empty()


def send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def replies(page: Page):
    return page.locator("#transcript .message.assistant .text")


def transcript(page: Page) -> list[str]:
    return page.locator("#transcript > li").all_inner_texts()


def test_a_bad_key_is_refused_on_the_sign_in_page(page, server):
    sign_in(page, server, key="avm_aaaaaaaaaaaa_" + "A" * 43)
    expect(page.get_by_role("alert")).to_contain_text("refused this key")
    expect(page.locator("#workspace")).to_be_hidden()
    page.get_by_label("API key").fill("")
    shot(page, "01-sign-in")


def test_a_user_chats_sees_the_reply_stream_runs_a_tool_and_finds_the_history_after_a_reload(page, server):
    text_frames: list[str] = []
    page.on(
        "websocket",
        lambda ws: ws.on(
            "framereceived", lambda f: text_frames.append(f) if '"text_delta"' in str(f) else None
        ),
    )
    sign_in(page, server)
    open_new_image(page, "story")

    message = "Hello playground, please stream this reply word by word so that everyone can watch it arrive"
    send(page, message)
    streaming = page.locator("#transcript .message.assistant.streaming")
    expect(streaming).to_contain_text("please")  # words arrive while the turn runs
    partial = streaming.locator(".text").inner_text()
    shot(page, "02-streaming")
    final = "Echo: " + message
    expect(replies(page).last).to_have_text(final)
    expect(streaming).to_have_count(0)
    assert final.startswith(partial)
    assert len(text_frames) >= 3  # streamed in several frames, not sent whole

    send(page, '/tool calculator {"expression": "6*7"}')
    card = page.locator("#transcript .message.tool")
    expect(card.locator(".tool-name")).to_have_text("calculator")
    expect(card.locator(".tool-input pre")).to_contain_text('"expression": "6*7"')
    expect(card.locator(".tool-result pre")).to_have_text("42")
    expect(replies(page).last).to_have_text("Echo: calculator returned: 42")
    expect(page.locator("#usage-turns")).to_have_text("2")  # billed usage, from /v1/usage (admin key)
    expect(page.locator("#usage-source")).to_contain_text("Billed")
    assert int(page.locator("#usage-total").inner_text()) > 0
    shot(page, "03-tool-turn")
    before = transcript(page)

    page.reload()  # the key stays in the tab's sessionStorage: signed in again, same image
    expect(page.locator("#workspace")).to_be_visible()
    expect(page.locator("#transcript .message.tool .tool-result pre")).to_have_text("42")
    assert transcript(page) == before
    expect(page.locator("#usage-turns")).to_have_text("2")
    shot(page, "04-history-after-reload")

    # The key lived in this tab's sessionStorage only (never localStorage, never a URL); signing
    # out forgets it.
    assert page.evaluate("sessionStorage.getItem('agentvm.key')") == server.admin_token()
    assert page.evaluate("localStorage.length") == 0
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.get_by_label("API key")).to_have_value("")


def test_the_page_asks_for_batched_frames_and_shows_a_reply_that_arrives_batched(page, server):
    received: list[str] = []
    sockets = []

    def watch(ws) -> None:
        sockets.append(ws.url)
        ws.on("framereceived", lambda payload: received.append(str(payload)))

    page.on("websocket", watch)
    sign_in(page, server)
    open_new_image(page, "batched")
    message = "several frames travel in one message"
    send(page, message)
    expect(replies(page).last).to_have_text("Echo: " + message)
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()  # the end was seen
    assert sockets == [server.url + "?frames=batch"]
    batches = [json.loads(p) for p in received if p.startswith("[")]
    assert batches, received  # the turn's start and its end each came as one array
    types = [frame["type"] for batch in batches for frame in batch]
    assert "message_start" in types and "conversation_end" in types


def test_stop_interrupts_a_streaming_reply_and_keeps_what_was_said(page, server):
    sign_in(page, server)
    open_new_image(page, "interrupt")
    send(page, LONG)
    expect(page.locator("#transcript .message.assistant.streaming")).to_contain_text("word1")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_enabled()
    stop.click()
    expect(page.locator("#transcript .message.note", has_text="Interrupted")).to_be_visible()
    expect(stop).to_be_disabled()
    expect(page.locator("#transcript .message.assistant.streaming")).to_have_count(0)
    kept = replies(page).last.inner_text()
    assert kept.startswith("Echo: word0 word1") and len(kept) < len("Echo: " + LONG)
    shot(page, "06-interrupted")
    page.reload()
    expect(replies(page).last).to_have_text(kept)  # the partial reply was stored


def test_a_tool_call_waits_for_approval_across_a_reload_then_runs_when_approved(page, server):
    sign_in(page, server)
    open_new_image(page, "approval", approval=True)
    send(page, '/tool calculator {"expression": "2+3"}')
    approve = page.get_by_role("button", name="Approve calculator")
    expect(approve).to_be_visible()
    expect(page.get_by_role("button", name="Deny calculator")).to_be_visible()
    expect(page.locator("#status")).to_have_text("The turn waits for your answer")
    shot(page, "05-approval")

    page.reload()  # the wait is stored: the page finds it again
    expect(approve).to_be_visible()
    expect(page.locator("#transcript .message.tool .tool-input pre")).to_contain_text('"2+3"')
    approve.click()
    expect(page.locator("#transcript .message.tool .tool-result pre")).to_have_text("5")
    expect(replies(page).last).to_have_text("Echo: calculator returned: 5")
    expect(approve).to_have_count(0)

    send(page, '/tool calculator {"expression": "9*9"}')  # the next call: denied
    page.get_by_role("button", name="Deny calculator").click()
    denied = page.locator("#transcript .message.tool.failed")
    expect(denied.locator(".tool-result pre")).to_have_text("Execution denied: denied in the playground")
    expect(replies(page).last).to_contain_text("Execution denied")
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()


def test_a_dropped_websocket_reconnects_and_resumes_the_reply_from_its_last_seq(page, server):
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws))
    sign_in(page, server)
    open_new_image(page, "resume")
    # Every state of the reply's text, as the page shows it.
    page.evaluate(
        """() => {
          window.replyTexts = [];
          new MutationObserver(() => {
            const last = [...document.querySelectorAll('#transcript .message.assistant .text')].pop();
            if (last) window.replyTexts.push(last.textContent);
          }).observe(document.getElementById('transcript'),
                     {subtree: true, childList: true, characterData: true});
        }"""
    )
    # The text of every text_delta the page handled (after its seq check), batched or not.
    page.evaluate(
        """() => {
          window.deltas = [];
          const connection = agentvmPlayground.connection, handle = connection.onEvent;
          connection.onEvent = (frame) => {
            if (frame.type === 'text_delta') window.deltas.push(frame.data.text);
            handle(frame);
          };
        }"""
    )
    send(page, LONG)
    reply = replies(page).last
    expect(reply).to_contain_text("word2")
    page.evaluate("agentvmPlayground.connection.socket.close()")  # the network drops it
    expect(page.locator("#status")).to_contain_text("Reconnected; resumed after seq")
    shot(page, "07-resumed")
    final = "Echo: " + LONG
    expect(reply).to_have_text(final)
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()
    # no key in the URL; batched frames asked for (docs/protocol.md, "Batched frames")
    assert len(sockets) == 2 and {ws.url for ws in sockets} == {server.url + "?frames=batch"}
    texts = page.evaluate("window.replyTexts")
    # Every state the page showed is a prefix of the reply, and the deltas alone rebuilt the whole
    # reply (nothing twice, nothing missing) before assistant_message set the stored text (the same).
    assert all(final.startswith(t) for t in texts), texts
    assert texts[-1] == final, texts
    assert "".join(page.evaluate("window.deltas")) == final
    assert replies(page).count() == 1


def test_an_image_built_from_an_agent_resource_picked_in_the_form_runs_the_agents_tools(page, server):
    admin = {"Authorization": f"Bearer {server.admin_token()}"}
    for resource in (
        {"kind": "tool", "name": "calc", "spec": {"tool": {"type": "builtin", "name": "calculator"}}},
        {
            "kind": "agent",
            "name": "helper",
            "description": "terse, counts",
            "spec": {"systemPrompt": "Be terse.", "tools": ["resource://tools/calc@1"]},
        },
    ):
        assert httpx.post(f"{server.http}/v1/resources", json=resource, headers=admin).status_code == 201
    sign_in(page, server)
    expect(page.locator("#workspace")).to_be_visible()
    page.get_by_label("New container id").fill("agents")
    page.get_by_role("button", name="Create container").click()
    page.get_by_label("From an agent resource").select_option("resource://agents/helper@1")
    expect(page.get_by_label("Name")).to_have_value("helper")
    expect(page.get_by_label("System prompt")).to_be_disabled()  # the agent brings its own
    page.get_by_role("button", name="Create image").click()
    expect(page.get_by_label("Image", exact=True)).to_contain_text("helper")
    send(page, '/tool calculator {"expression": "1+1"}')
    expect(page.locator("#transcript .message.tool .tool-result pre")).to_have_text("2")
    expect(replies(page).last).to_have_text("Echo: calculator returned: 2")


def test_a_client_key_chats_and_sees_the_usage_of_its_replies(page, server):
    admin = {"Authorization": f"Bearer {server.admin_token()}"}
    made = httpx.post(f"{server.http}/v1/auth/keys", json={"scopes": ["client"]}, headers=admin)
    sign_in(page, server, key=made.json()["token"])
    open_new_image(page, "client-key")
    send(page, "hi there")
    expect(replies(page).last).to_have_text("Echo: hi there")
    expect(page.locator("#usage-source")).to_contain_text("GET /v1/usage needs an admin key")
    expect(page.locator("#usage-turns")).to_have_text("1")
    assert int(page.locator("#usage-output").inner_text()) > 0
    # The browser logs the one refusal of GET /v1/usage (asked once per sign-in), as expected.
    refused = [p for p in page.problems if "status of 403" in p]
    assert len(refused) == 1
    page.problems.remove(refused[0])


def test_the_economy_box_asks_for_the_economy_cadence_and_the_reply_still_arrives(page, server):
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(server.http + "/")
    expect(page.get_by_label("WebSocket URL")).to_have_value(server.url)  # the page is set up
    expect(page.get_by_label("Economy cadence")).not_to_be_checked()  # live unless chosen
    page.get_by_label("Economy cadence").check()
    page.get_by_label("API key").fill(server.admin_token())
    page.get_by_role("button", name="Sign in").click()
    open_new_image(page, "economy")
    message = "text in two-second windows"
    send(page, message)
    expect(replies(page).last).to_have_text("Echo: " + message)
    assert sockets == [server.url + "?frames=batch&cadence=economy"]


def test_an_mcp_tools_image_result_is_shown_as_an_image(page, server):
    from tests.npm_tools import SERVER_EVERYTHING, have_npm, installed

    if not have_npm():
        if os.environ.get("CI") == "true":
            pytest.fail("node and npm are required under CI (server-everything)")
        pytest.skip("node and npm are not installed")
    admin = {"Authorization": f"Bearer {server.admin_token()}"}
    config = {"command": str(installed(*SERVER_EVERYTHING)), "args": ["stdio"], "timeoutS": 30}
    for resource in (
        {
            "kind": "tool",
            "name": "everything",
            "spec": {"mcpServer": {"name": "everything", "config": config}},
        },
        {"kind": "agent", "name": "imager", "spec": {"tools": ["resource://tools/everything@1"]}},
    ):
        answer = httpx.post(f"{server.http}/v1/resources", json=resource, headers=admin)
        assert answer.status_code == 201, answer.text
    sign_in(page, server)
    expect(page.locator("#workspace")).to_be_visible()
    page.get_by_label("New container id").fill("images")
    page.get_by_role("button", name="Create container").click()
    page.get_by_label("From an agent resource").select_option("resource://agents/imager@1")
    page.get_by_role("button", name="Create image").click()
    expect(page.get_by_label("Image", exact=True)).to_contain_text("imager")
    send(page, "/tool get-tiny-image {}")
    image = page.locator("#transcript .message.tool .tool-result img.tool-image")
    expect(image).to_have_count(1)
    expect(image).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    assert page.evaluate("document.querySelector('img.tool-image').naturalWidth") > 0  # it decoded
    shot(page, "09-tool-image")
    page.reload()  # the history shows it again
    expect(page.locator("#transcript .message.tool .tool-result img.tool-image")).to_have_count(1)


def test_an_mcp_servers_question_is_answered_in_a_form_in_the_tool_card(page, server):
    """server-everything's ``trigger-elicitation-request`` asks for a form of many field types; a
    value its schema refuses is said next to the form, which stays; the accepted answer reaches it."""
    from tests.npm_tools import SERVER_EVERYTHING, have_npm, installed

    if not have_npm():
        if os.environ.get("CI") == "true":
            pytest.fail("node and npm are required under CI (server-everything)")
        pytest.skip("node and npm are not installed")
    admin = {"Authorization": f"Bearer {server.admin_token()}"}
    config = {"command": str(installed(*SERVER_EVERYTHING)), "args": ["stdio"], "timeoutS": 30}
    for resource in (
        {"kind": "tool", "name": "asker", "spec": {"mcpServer": {"name": "asker", "config": config}}},
        {"kind": "agent", "name": "asking", "spec": {"tools": ["resource://tools/asker@1"]}},
    ):
        answer = httpx.post(f"{server.http}/v1/resources", json=resource, headers=admin)
        assert answer.status_code == 201, answer.text
    sign_in(page, server)
    expect(page.locator("#workspace")).to_be_visible()
    page.get_by_label("New container id").fill("questions")
    page.get_by_role("button", name="Create container").click()
    page.get_by_label("From an agent resource").select_option("resource://agents/asking@1")
    page.get_by_role("button", name="Create image").click()
    expect(page.get_by_label("Image", exact=True)).to_contain_text("asking")
    send(page, "/tool trigger-elicitation-request {}")
    form = page.locator("#transcript .message.tool form.question")
    expect(form).to_have_count(1)
    expect(form.locator(".question-message")).to_have_text("Please provide inputs for the following fields:")
    expect(form.locator("label").first).to_contain_text("String *")  # a field per property, required marked
    expect(form.locator("select[name=titledSingleSelectEnum]")).to_have_value(
        "hero-1"
    )  # a select, its default
    form.locator("input[name=name]").fill("Ada Lovelace")
    form.locator("input[name=check]").check()
    form.locator("input[name=email]").fill("not an email")
    shot(page, "10-mcp-question")
    form.get_by_role("button", name="Submit").click()
    expect(form.locator(".question-error")).to_contain_text("email")  # refused: the form stays
    form.locator("input[name=email]").fill("ada@example.com")
    form.get_by_role("button", name="Submit").click()
    expect(form).to_have_count(0)
    result = page.locator("#transcript .message.tool .tool-result pre")
    expect(result).to_contain_text("Name: Ada Lovelace")
    expect(result).to_contain_text("Agreed to terms: true")
    expect(result).to_contain_text("Email: ada@example.com")


def in_view(page: Page, selector: str) -> bool:
    """The element's box lies within the transcript's visible part and within the window."""
    return page.evaluate(
        """(selector) => {
            const node = document.querySelector(selector);
            const list = document.querySelector('#transcript').getBoundingClientRect();
            const box = node.getBoundingClientRect();
            return box.height > 0 && box.top >= list.top - 1 && box.bottom <= list.bottom + 1
                && box.bottom <= window.innerHeight + 1;
        }""",
        selector,
    )


def test_the_view_follows_a_long_turn_renders_markdown_sanitised_and_keeps_approve_in_view(browser, server):
    context = browser.new_context(viewport={"width": 1000, "height": 520})  # a short window
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        sign_in(page, server)
        open_new_image(page, "follow", approval=True)

        # Markdown, sanitised: bold becomes <strong>, a script or an onerror= never runs.
        send(
            page,
            "**bold** and `code` <script>window.__pwned=1</script>"
            '<img src="data:image/png;base64,AAAA" onerror="window.__pwned=2">',
        )
        expect(page.locator("#transcript .message.assistant .text strong")).to_have_text("bold")
        expect(page.locator("#transcript .message.assistant .text code")).to_have_text("code")
        expect(page.locator("#transcript .message.streaming")).to_have_count(0)
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#transcript .message.assistant script").count() == 0
        assert page.locator("#transcript .message.assistant [onerror]").count() == 0

        # Fill the transcript past the window, then a long reply: its latest words stay in view.
        for n in range(3):
            send(page, f"filler {n} " + LONG)
            expect(replies(page).last).to_have_text(f"Echo: filler {n} " + LONG)
        send(page, "LONG " + LONG + " " + LONG)
        expect(page.locator("#transcript .message.waiting")).to_have_count(0)
        streaming = page.locator("#transcript .message.assistant.streaming")
        expect(streaming).to_contain_text("word12")
        assert in_view(page, "#transcript .message.assistant.streaming")
        expect(streaming).to_contain_text("word29 word0")  # the second half (it scrolled on)
        assert in_view(page, "#transcript .message.assistant.streaming")
        expect(replies(page).last).to_have_text("Echo: LONG " + LONG + " " + LONG)
        assert in_view(page, "#transcript > li:last-child")

        # A tool call asking for approval: its buttons are in view, and approving runs it.
        send(page, '/tool calculator {"expression": "6*7"}')
        approve = page.get_by_role("button", name="Approve calculator")
        expect(approve).to_be_visible()
        assert in_view(page, "#transcript .approval .approve")
        assert in_view(page, "#transcript .approval .deny")
        shot(page, "10-approval-in-view")
        approve.click()
        expect(replies(page).last).to_have_text("Echo: calculator returned: 42")
        assert in_view(page, "#transcript > li:last-child")

        # Scrolled up while a reply streams: it stops following (the user's place is kept) and
        # offers the jump, which goes back to the latest.
        send(page, "while scrolled up " + LONG)
        expect(page.locator("#transcript .message.assistant.streaming")).to_contain_text("word3")
        page.locator("#transcript").evaluate("list => list.scrollTo(0, 0)")
        jump = page.get_by_role("button", name="Jump to latest")
        expect(jump).to_be_visible()
        expect(replies(page).last).to_have_text("Echo: while scrolled up " + LONG)
        assert page.locator("#transcript").evaluate("list => list.scrollTop") == 0
        assert not in_view(page, "#transcript > li:last-child")
        jump.click()
        expect(jump).to_be_hidden()
        assert in_view(page, "#transcript > li:last-child")
    finally:
        context.close()
    assert errors == []


def test_a_waiting_line_shows_until_the_first_token(page, server):
    sign_in(page, server)
    open_new_image(page, "waiting")
    page.evaluate(
        """() => {
          window.added = [];
          new MutationObserver((records) => {
            for (const r of records)
              for (const n of r.addedNodes) if (n.className) window.added.push(n.className);
          }).observe(document.getElementById('transcript'), {childList: true});
        }"""
    )
    send(page, "hello")
    expect(replies(page).last).to_have_text("Echo: hello")
    added = page.evaluate("window.added")
    assert added[:2] == ["message user", "message note waiting"], added
    assert added[2].startswith("message assistant"), added
    expect(page.locator("#transcript .message.waiting")).to_have_count(0)  # gone with the first token


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory):
    """A server whose default model is Anthropic's, played by ``avm fake-llm``, which a test can
    make answer 429 first."""
    from agentvm.fakellm import FakeLLMConfig, FakeLLMServer

    with FakeLLMServer(FakeLLMConfig(ttft_ms=5, tokens_per_second=50, reply_tokens=6)) as fake:
        env = base_env(
            **ENV,
            ANTHROPIC_API_KEY="sk-ant-playground-test-key",
            ANTHROPIC_BASE_URL=fake.base_url,
            AVM_PROVIDER_RETRY_BASE_MS="10",
        )
        with avm_serve(tmp_path_factory.mktemp("busy"), free_port(), env=env) as running:
            running.fake = fake
            yield running


def test_a_provider_retry_shows_as_a_status_line_until_the_reply_starts(page, busy_server):
    from agentvm.fakellm import reply_tokens

    sign_in(page, busy_server)
    open_new_image(page, "busy")
    busy_server.fake.add_faults([{"kind": "429", "retry_after": 2}])
    send(page, "hello")
    status = page.locator("#transcript .message.waiting.retrying")
    expect(status).to_have_text("Provider busy (rate limited), retrying in 2s (attempt 2)…")
    shot(page, "11-provider-retry")
    expect(replies(page).last).to_have_text("".join(reply_tokens(6)))
    expect(status).to_have_count(0)  # gone with the retry's first token


def test_a_tool_steps_text_shows_before_its_card_live_and_after_a_reload(page, busy_server):
    sign_in(page, busy_server)
    open_new_image(page, "ordered")  # with the calculator
    busy_server.fake.state.add_script(
        [
            {
                "text": "Let me compute.",
                "tool_calls": [{"name": "calculator", "input": {"expression": "6*7"}}],
            },
            {"text": "It is 42."},
        ]
    )
    send(page, "6*7?")
    expect(replies(page).last).to_have_text("It is 42.")
    live = transcript(page)
    kinds = page.locator("#transcript > li").evaluate_all("items => items.map(i => i.className)")
    assert [k.split()[1] for k in kinds if "assistant" in k or "tool" in k] == [
        "assistant",
        "tool",
        "assistant",
    ]

    page.reload()
    expect(page.locator("#transcript .message.tool .tool-result pre")).to_have_text("42")
    assert transcript(page) == live  # the history reads in the order the turn streamed
