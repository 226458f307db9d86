"""ResourceX locators in both grammars (RXL ``domain/path/name.type@version`` and RXI
``registry/path/name:tag@sha256:...``) and how they map onto resource names."""

from __future__ import annotations

import pytest

from agentvm.errors import InvalidLocator
from agentvm.resources.locator import format_locator, manifest_parts, parse_locator

DIGEST = "ab" * 32


@pytest.mark.parametrize(
    ("locator", "name", "type_", "selector", "digest"),
    [
        ("localhost/team/greeting.prompt@1.0.0", "team/greeting", "prompt", "1.0.0", None),
        (
            "deepractice.ai/prompts/assistant.prompt@1.0.0",
            "deepractice.ai/prompts/assistant",
            "prompt",
            "1.0.0",
            None,
        ),
        ("hello.text", "hello", "text", "latest", None),
        ("hello.txt@2", "hello", "text", "2", None),  # an alias names its type
        ("hello.system-prompt", "hello", "prompt", "latest", None),
        ("my.notes", "my.notes", None, "latest", None),  # not a type: the dot stays in the name
        ("team/a/b/c.json@stable", "team/a/b/c", "json", "stable", None),
        ("localhost:3098/team/foo:stable", "team/foo", None, "stable", None),  # a registry's port
        ("registry.x.dev/foo:1.0.0", "registry.x.dev/foo", None, "1.0.0", None),
        (f"foo@sha256:{DIGEST}", "foo", None, "latest", DIGEST),
        (f"team/foo:3@sha256:{DIGEST}", "team/foo", None, "3", DIGEST),
        ("foo:latest", "foo", None, "latest", None),
    ],
)
def test_both_grammars_map_onto_resource_names(locator, name, type_, selector, digest):
    parsed = parse_locator(locator)
    assert (parsed.resource_name, parsed.type, parsed.selector, parsed.digest) == (
        name,
        type_,
        selector,
        digest,
    )


@pytest.mark.parametrize(
    ("locator", "why"),
    [
        ("", "non-empty"),
        ("x" * 257, "256"),
        ("/abs/path.text", "absolute"),
        ("a/../b", "'..'"),
        ("a;b", "';'"),
        ("a$b", "'$'"),
        ("a\nb", "'\\n'"),
        ("a//b", "empty segment"),
        ("a:b/c", "':' only"),
        ("a:b:c", "after ':'"),
        ("a:", "after ':'"),
        ("a@", "one '@'"),
        ("a:1@2", "digest, not @<version>"),
        ("a@sha256:XYZ", "sha256:<64"),
        ("a b", "segments"),
        ("a@-bad", "tag"),
    ],
)
def test_bad_locators_say_what_is_wrong(locator, why):
    with pytest.raises(InvalidLocator) as caught:
        parse_locator(locator)
    assert why in caught.value.message


@pytest.mark.parametrize("name", ["team/greeting", "greeting", "deepractice.ai/x/y", "a.b", "notes.txt"])
def test_formatted_locators_parse_back_to_the_same_resource(name):
    locator = format_locator(name, "prompt", "3")
    parsed = parse_locator(locator)
    assert (parsed.resource_name, parsed.type, parsed.selector) == (name, "prompt", "3")
    parts = manifest_parts(name)
    assert locator.startswith(parts["domain"] + "/")
