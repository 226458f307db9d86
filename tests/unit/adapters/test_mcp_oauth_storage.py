"""MCP OAuth token storage: sealed at rest, bound to tenant and server URL."""

from __future__ import annotations

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from agentvm.adapters.mcp.oauth import SealedTokenStorage, record_key
from agentvm.configcentre.sealing import SecretSealer, SecretUnreadable
from tests.mcp_servers.oauth_provider import DictRecords

URL = "https://mcp.example.test/mcp"


@pytest.fixture
def sealer() -> SecretSealer:
    return SecretSealer(lambda: [b"s" * 32])


async def test_tokens_and_client_round_trip_sealed(sealer: SecretSealer) -> None:
    records = DictRecords()
    storage = SealedTokenStorage(records, sealer, "t1", URL)
    assert await storage.get_tokens() is None
    await storage.set_tokens(OAuthToken(access_token="at-secret", refresh_token="rt-secret", expires_in=60))
    client = OAuthClientInformationFull(
        client_id="cid", client_secret="cs-secret", redirect_uris=["https://avm.test/cb"]
    )
    await storage.set_client_info(client)
    tokens = await storage.get_tokens()
    assert tokens is not None and tokens.access_token == "at-secret" and tokens.refresh_token == "rt-secret"
    got = await storage.get_client_info()
    assert got is not None and got.client_secret == "cs-secret"
    at_rest = " ".join(records.values())
    for plain in ("at-secret", "rt-secret", "cs-secret"):
        assert plain not in at_rest
    assert all(URL not in key for key in records.rows)


async def test_another_tenant_sees_nothing_and_a_copied_record_does_not_open(sealer: SecretSealer) -> None:
    records = DictRecords()
    await SealedTokenStorage(records, sealer, "t1", URL).set_tokens(OAuthToken(access_token="at"))
    other = SealedTokenStorage(records, sealer, "t2", URL)
    assert await other.get_tokens() is None
    _, sealed, _ = records.rows[record_key("t1", URL, "tokens")]
    records.rows[record_key("t2", URL, "tokens")] = ("t2", sealed, None)  # copied under t2 by hand
    with pytest.raises(SecretUnreadable):
        await other.get_tokens()


async def test_metadata_round_trips_and_forget_drops_every_record_of_that_tenant_and_url(
    sealer: SecretSealer,
) -> None:
    records = DictRecords()
    storage = SealedTokenStorage(records, sealer, "t1", URL)
    metadata = OAuthMetadata.model_validate(
        {
            "issuer": "https://auth.example.test",
            "authorization_endpoint": "https://auth.example.test/oauth/authorize",
            "token_endpoint": "https://auth.example.test/oauth/token",
        }
    )
    await storage.set_metadata(metadata)
    await storage.set_tokens(OAuthToken(access_token="at", expires_in=60))
    await SealedTokenStorage(records, sealer, "t1", URL + "/other").set_tokens(OAuthToken(access_token="x"))
    got = await storage.get_metadata()
    assert got is not None and str(got.token_endpoint) == "https://auth.example.test/oauth/token"
    connected, expires_at = await storage.expires_at()
    assert connected and expires_at is not None
    await storage.forget()
    assert await storage.get_tokens() is None and await storage.get_metadata() is None
    assert await storage.expires_at() == (False, None)
    assert len(records.rows) == 1  # the other URL's tokens stay


async def test_a_record_written_in_plaintext_is_not_taken_for_tokens(sealer: SecretSealer) -> None:
    """``SecretSealer.open`` passes an unsealed value through (an older version's plaintext
    setting); AgentVM seals every OAuth record, so one in plaintext was not written by it."""
    records = DictRecords()
    storage = SealedTokenStorage(records, sealer, "t1", URL)
    planted = OAuthToken(access_token="planted").model_dump_json()
    records.rows[record_key("t1", URL, "tokens")] = ("t1", planted, None)
    assert await storage.get_tokens() is None
