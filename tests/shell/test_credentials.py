from urllib.parse import parse_qs

import httpx
import pytest
import trio

from shell.credentials import (
    CredentialProvider,
    CredentialRefreshError,
    NoCredentials,
    OAuthCredential,
    StaticKey,
    refresh_failure,
)

TOKEN_URL = "http://127.0.0.1:9/oauth/token"
KEY = "sk-test-abcdefghijklmnop1234"


def client_for(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def token_endpoint(replies, seen=None):
    """A token endpoint answering with `replies` in order and recording the forms it receives."""
    replies = list(replies)

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append((request, {k: v[0] for k, v in parse_qs(request.content.decode()).items()}))
        return replies.pop(0)

    return handler


def grant(access: str, refresh: str | None = None) -> httpx.Response:
    body = {"access_token": access, "token_type": "Bearer", "expires_in": 3600}
    if refresh is not None:
        body["refresh_token"] = refresh
    return httpx.Response(200, json=body)


# --- NoCredentials --------------------------------------------------------------------------------------


@pytest.mark.trio
async def test_no_credentials_has_no_credential_and_cannot_refresh():
    provider = NoCredentials()
    assert provider.current() is None
    async with client_for(token_endpoint([])) as client:
        with pytest.raises(CredentialRefreshError, match="no credentials configured"):
            await provider.refresh(client)


def test_every_provider_satisfies_the_protocol():
    for provider in (NoCredentials(), StaticKey("X", environ={}), OAuthCredential(TOKEN_URL, "r")):
        assert isinstance(provider, CredentialProvider)


# --- StaticKey ------------------------------------------------------------------------------------------


def test_static_key_reads_the_environment_variable():
    assert StaticKey("MY_KEY", environ={"MY_KEY": f"  {KEY}\n"}).current() == KEY


def test_static_key_reads_the_file(tmp_path):
    path = tmp_path / "key"
    path.write_text(f"{KEY}\n")
    assert StaticKey(file=path).current() == KEY


def test_static_key_prefers_the_variable_and_falls_back_to_the_file(tmp_path):
    path = tmp_path / "key"
    path.write_text("from-file")
    assert StaticKey("MY_KEY", path, environ={"MY_KEY": "from-env"}).current() == "from-env"
    assert StaticKey("MY_KEY", path, environ={"MY_KEY": " "}).current() == "from-file"


def test_static_key_needs_a_source():
    with pytest.raises(ValueError):
        StaticKey()


def test_a_missing_static_key_is_none_until_found():
    assert StaticKey("MY_KEY", environ={}).current() is None


@pytest.mark.trio
async def test_static_key_refresh_rereads_a_rotated_variable():
    environ = {"MY_KEY": "old-key"}
    provider = StaticKey("MY_KEY", environ=environ)
    environ["MY_KEY"] = "new-key"
    assert provider.current() == "old-key"
    async with client_for(token_endpoint([])) as client:
        await provider.refresh(client)
    assert provider.current() == "new-key"


@pytest.mark.trio
async def test_static_key_refresh_rereads_a_rotated_file(tmp_path):
    path = tmp_path / "key"
    path.write_text("old-key")
    provider = StaticKey(file=str(path))
    path.write_text("new-key\n")
    async with client_for(token_endpoint([])) as client:
        await provider.refresh(client)
    assert provider.current() == "new-key"


@pytest.mark.trio
async def test_static_key_refresh_names_the_missing_variable_and_keeps_the_old_key():
    environ = {"MY_KEY": KEY}
    provider = StaticKey("MY_KEY", environ=environ)
    del environ["MY_KEY"]
    async with client_for(token_endpoint([])) as client:
        with pytest.raises(CredentialRefreshError, match=r"\$MY_KEY") as caught:
            await provider.refresh(client)
    assert "fix the API key in $MY_KEY" in str(caught.value)
    assert provider.current() == KEY


@pytest.mark.trio
async def test_static_key_refresh_names_the_missing_file(tmp_path):
    path = tmp_path / "absent"
    provider = StaticKey(file=path)
    async with client_for(token_endpoint([])) as client:
        with pytest.raises(CredentialRefreshError, match="does not exist") as caught:
            await provider.refresh(client)
    assert str(path) in str(caught.value)


@pytest.mark.trio
async def test_static_key_refresh_refuses_an_empty_file(tmp_path):
    path = tmp_path / "key"
    path.write_text("\n")
    async with client_for(token_endpoint([])) as client:
        with pytest.raises(CredentialRefreshError, match="is empty"):
            await StaticKey(file=path).refresh(client)


def test_static_key_repr_hides_the_key():
    text = repr(StaticKey("MY_KEY", environ={"MY_KEY": KEY}))
    assert KEY not in text
    assert "MY_KEY" in text
    assert "<set>" in text


# --- OAuthCredential ------------------------------------------------------------------------------------


@pytest.mark.trio
async def test_oauth_refresh_posts_the_refresh_grant_as_a_form():
    seen = []
    provider = OAuthCredential(TOKEN_URL, "refresh-1", client_id="turnkeep")
    async with client_for(token_endpoint([grant("access-1")], seen)) as client:
        await provider.refresh(client)
    request, form = seen[0]
    assert request.method == "POST"
    assert str(request.url) == TOKEN_URL
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert form == {"grant_type": "refresh_token", "refresh_token": "refresh-1", "client_id": "turnkeep"}


@pytest.mark.trio
async def test_oauth_refresh_takes_the_new_access_token():
    provider = OAuthCredential(TOKEN_URL, "refresh-1", access_token="access-0")
    assert provider.current() == "access-0"
    async with client_for(token_endpoint([grant("access-1")])) as client:
        await provider.refresh(client)
    assert provider.current() == "access-1"


@pytest.mark.trio
async def test_oauth_without_an_access_token_has_none_until_refreshed():
    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    assert provider.current() is None
    async with client_for(token_endpoint([grant("access-1")])) as client:
        await provider.refresh(client)
    assert provider.current() == "access-1"


@pytest.mark.trio
async def test_oauth_uses_a_rotated_refresh_token_next_time():
    seen = []
    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    replies = [grant("access-1", refresh="refresh-2"), grant("access-2")]
    async with client_for(token_endpoint(replies, seen)) as client:
        await provider.refresh(client)
        await provider.refresh(client)
    assert [form["refresh_token"] for _request, form in seen] == ["refresh-1", "refresh-2"]
    assert provider.current() == "access-2"


@pytest.mark.trio
async def test_oauth_keeps_the_refresh_token_when_it_is_not_rotated():
    seen = []
    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    async with client_for(token_endpoint([grant("access-1"), grant("access-2")], seen)) as client:
        await provider.refresh(client)
        await provider.refresh(client)
    assert [form["refresh_token"] for _request, form in seen] == ["refresh-1", "refresh-1"]


@pytest.mark.trio
async def test_oauth_invalid_grant_says_to_log_in_again_without_the_tokens():
    refused = httpx.Response(
        400,
        json={"error": "invalid_grant", "error_description": "Refresh token refresh-1 is revoked."},
    )
    provider = OAuthCredential(TOKEN_URL, "refresh-1", access_token="access-0")
    async with client_for(token_endpoint([refused])) as client:
        with pytest.raises(CredentialRefreshError) as caught:
            await provider.refresh(client)
    message = str(caught.value)
    assert "HTTP 400" in message
    assert "invalid_grant" in message
    assert "log in again" in message
    assert "refresh-1" not in message
    assert "access-0" not in message
    assert provider.current() == "access-0"


@pytest.mark.trio
async def test_oauth_server_error_suggests_trying_again_later():
    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    async with client_for(token_endpoint([httpx.Response(503, text="upstream down")])) as client:
        with pytest.raises(CredentialRefreshError, match=r"HTTP 503.*upstream down.*try again later"):
            await provider.refresh(client)


@pytest.mark.trio
@pytest.mark.parametrize(
    "reply",
    [
        httpx.Response(200, text="<html>not json</html>"),
        httpx.Response(200, json=["access-1"]),
        httpx.Response(200, json={"access_token": 42}),
    ],
)
async def test_oauth_bad_json_is_a_refresh_error(reply):
    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    async with client_for(token_endpoint([reply])) as client:
        with pytest.raises(CredentialRefreshError, match="not a JSON token object"):
            await provider.refresh(client)
    assert provider.current() is None


@pytest.mark.trio
@pytest.mark.parametrize("body", [{"token_type": "Bearer"}, {"access_token": ""}])
async def test_oauth_reply_without_an_access_token_is_a_refresh_error(body):
    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    async with client_for(token_endpoint([httpx.Response(200, json=body)])) as client:
        with pytest.raises(CredentialRefreshError, match="without an access_token"):
            await provider.refresh(client)


@pytest.mark.trio
async def test_oauth_connect_timeout_is_a_refresh_error():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    async with client_for(handler) as client:
        with pytest.raises(CredentialRefreshError, match="did not answer within 10 s"):
            await provider.refresh(client)


@pytest.mark.trio
async def test_oauth_unreachable_endpoint_is_a_refresh_error():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    async with client_for(handler) as client:
        with pytest.raises(CredentialRefreshError, match="could not be reached"):
            await provider.refresh(client)


@pytest.mark.trio
async def test_oauth_refresh_is_bounded_even_when_the_endpoint_stalls(autojump_clock):
    async def handler(request: httpx.Request) -> httpx.Response:
        await trio.sleep(3_600)
        return grant("too-late")

    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    start = trio.current_time()
    async with client_for(handler) as client:
        with pytest.raises(CredentialRefreshError, match="did not answer"):
            await provider.refresh(client)
    assert trio.current_time() - start == pytest.approx(10.0)


@pytest.mark.trio
async def test_concurrent_oauth_refreshes_share_one_request(autojump_clock):
    calls = []

    async def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        await trio.sleep(1)
        return grant(f"access-{len(calls)}", refresh=f"refresh-{len(calls) + 1}")

    provider = OAuthCredential(TOKEN_URL, "refresh-1")
    async with client_for(handler) as client, trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(provider.refresh, client)
    assert len(calls) == 1
    assert provider.current() == "access-1"


def test_oauth_repr_hides_the_tokens():
    text = repr(OAuthCredential(TOKEN_URL, "refresh-secret-1", access_token="access-secret-0"))
    assert "refresh-secret-1" not in text
    assert "access-secret-0" not in text
    assert TOKEN_URL in text


def test_oauth_needs_a_refresh_token():
    with pytest.raises(ValueError):
        OAuthCredential(TOKEN_URL, "")


@pytest.mark.trio
async def test_refresh_failure_is_none_when_the_refresh_worked_and_the_reason_when_it_did_not():
    assert await refresh_failure(StaticKey(env_var="K", environ={"K": KEY})) is None
    reason = await refresh_failure(NoCredentials())
    assert reason is not None and "no credentials configured" in reason


@pytest.mark.trio
async def test_refresh_failure_reports_an_unexpected_error_without_raising_or_leaking_a_key():
    class Broken:
        def current(self) -> str:
            return KEY

        async def refresh(self, client: httpx.AsyncClient) -> None:
            raise RuntimeError(f"exploded while sending {KEY}")

    reason = await refresh_failure(Broken())
    assert reason is not None and reason.startswith("RuntimeError: exploded while sending")
    assert KEY not in reason
