"""The official Python SDK's OAuth flow (`mcp.client.auth.OAuthClientProvider`) against
`mcpctl serve PROJECT`, end to end, and token exchange to an HTTP upstream.

The client starts with nothing: the proxy's `401` names its protected-resource metadata
(RFC 9728), the SDK reads it, fetches the authorization server's metadata, registers itself
(RFC 7591), runs the authorization code grant with PKCE (the redirect handler follows the
authorize URL with an HTTP client; the test's authorization server,
`tests/fixtures/authorization_server.py`, approves at once), gets a token for the proxy's
resource (RFC 8707) and opens the session. Then: a token for another resource refused (401), a
token without the scope refused (403 `insufficient_scope`), the issuer's key rotated with the
proxy running (the SDK's stored token is refused, it logs in again, the new key is accepted).

Token exchange (RFC 8693): a project whose HTTP server has `auth.tokenExchange`; the upstream
(`tests/fixtures/recording_upstream.py`) records every `Authorization` it receives: always the
exchanged token (cached per principal), never the client's; a refused exchange is the client's
error, naming the endpoint and the OAuth error, without the token; a stdio session (no token to
exchange) fails closed.

Needs `MCP_HTTP_PROXY` (the mcpctl binary); without it the module is skipped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from conftest import HTTP_PROXY, READ_TIMEOUT, text_of

if not HTTP_PROXY:
    pytest.skip("MCP_HTTP_PROXY is not set: test_oauth_flow.py tests `mcpctl serve PROJECT`",
                allow_module_level=True)

import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.auth import OAuthClientProvider  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken  # noqa: E402
from test_oauth import SCOPE, apply_spec, secured_project, serve  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from authorization_server import AuthorizationServer  # noqa: E402
from recording_upstream import RecordingUpstream  # noqa: E402

pytestmark = pytest.mark.anyio

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never served: the handler reads the redirect
EXCHANGE_SECRET = "exchange-secret-5d1e"


@pytest.fixture
def upstream() -> Iterator[RecordingUpstream]:
    with RecordingUpstream() as server:
        yield server


class MemoryStorage:
    """The SDK's `TokenStorage`, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """Stands in for the user's browser: follows the authorize URL and hands the redirect's
    code back to the SDK."""

    def __init__(self) -> None:
        self.visits: list[str] = []
        self._redirect: str | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.visits.append(authorization_url)
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = await http.get(authorization_url, follow_redirects=False)
        assert answer.status_code == 302, answer.text
        self._redirect = answer.headers["location"]

    async def callback(self) -> AuthorizationCodeResult:
        assert self._redirect is not None and self._redirect.startswith(REDIRECT_URI)
        query = {k: v[0] for k, v in parse_qs(urlparse(self._redirect).query).items()}
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


def provider(url: str, storage: MemoryStorage, browser: Browser) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="oauth-flow-test",
        redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
        grant_types=["authorization_code"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, storage, redirect_handler=browser.redirect,
                               callback_handler=browser.callback)


@asynccontextmanager
async def oauth_client(url: str, storage: MemoryStorage, browser: Browser) -> AsyncIterator[Client]:
    # No pooled connections: the proxy answers a 401/403 without reading the request's body,
    # and hyper then closes that connection; a pooled one reused at that moment fails with
    # "Server disconnected" instead of the refusal these tests look at.
    http = httpx2.AsyncClient(auth=provider(url, storage, browser), timeout=httpx2.Timeout(30, read=60),
                              limits=httpx2.Limits(max_keepalive_connections=0))

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with http, streamable_http_client(url, http_client=http) as (read_stream, write_stream):
            yield read_stream, write_stream

    c = Client(transport(), read_timeout_seconds=READ_TIMEOUT,
               client_info=types.Implementation(name="oauth-flow-test", version="1"), cache=None)
    async with c:
        yield c


async def test_the_sdk_logs_in_from_the_401_and_opens_a_session(tmp_path: Path, issuer: AuthorizationServer) -> None:
    home = tmp_path / "home"
    done = apply_spec(home, secured_project(issuer.issuer))
    assert done.returncode == 0, done.stderr
    with serve(home) as url:
        storage, browser = MemoryStorage(), Browser()
        async with oauth_client(url, storage, browser) as c:
            echoed = await c.call_tool("echo", {"message": "logged in"})
            assert text_of(echoed.content[0]) == "Echo: logged in"

        # It registered dynamically, asked for the advertised scope and the proxy's resource
        # (RFC 8707) at the authorize step and the token step, with PKCE.
        assert storage.client_info is not None and storage.client_info.client_id.startswith("client-")
        assert len(browser.visits) == 1
        authorize = {k: v[0] for k, v in parse_qs(urlparse(browser.visits[0]).query).items()}
        assert authorize["resource"] == url and authorize["scope"] == SCOPE
        assert authorize["code_challenge_method"] == "S256"
        [code_grant] = [r for r in issuer.token_requests if r["grant_type"] == "authorization_code"]
        assert code_grant["resource"] == url and len(code_grant["code_verifier"]) >= 43
        assert storage.tokens is not None
        claims = issuer.claims_of(storage.tokens.access_token)
        assert claims["aud"] == url and claims["scope"] == SCOPE and claims["sub"] == "alice"

        # The issuer rotates its key, the proxy keeps running: a client logging in now gets a
        # token of the new key, which the proxy accepts (it fetches the keys again for the
        # unknown `kid`).
        old_token = storage.tokens.access_token
        new_kid = issuer.rotate()
        fresh = MemoryStorage()
        async with oauth_client(url, fresh, browser) as c:
            assert any(t.name == "echo" for t in (await c.list_tools()).tools)
        assert len(browser.visits) == 2
        assert fresh.tokens is not None and issuer.claims_of(fresh.tokens.access_token)["aud"] == url
        assert issuer.jwks_fetches == 2
        # The first client's stored token was signed with the key that is gone now: refused,
        # and the SDK logs in again by itself, with no restart of anything.
        async with oauth_client(url, storage, browser) as c:
            echoed = await c.call_tool("echo", {"message": "after rotation"})
            assert text_of(echoed.content[0]) == "Echo: after rotation"
        assert len(browser.visits) == 3
        assert storage.tokens.access_token != old_token
        assert new_kid == issuer.kid


async def test_the_sdk_is_refused_a_token_for_another_resource_or_without_the_scope(
        tmp_path: Path, issuer: AuthorizationServer) -> None:
    home = tmp_path / "home"
    done = apply_spec(home, secured_project(issuer.issuer))
    assert done.returncode == 0, done.stderr
    with serve(home) as url:
        # The authorization server issues tokens for another resource: the proxy refuses them.
        issuer.audience_override = "https://other.example/mcp"
        browser = Browser()
        with pytest.raises(BaseException) as refused:  # noqa: PT011 (the SDK wraps it in groups)
            async with oauth_client(url, MemoryStorage(), browser) as c:
                await c.list_tools()
        assert "401" in repr(refused.value) or "Unauthorized" in repr(refused.value), repr(refused.value)
        # The SDK logged in (and retried), and every token it got was refused.
        assert browser.visits and len(issuer.issued) == len(browser.visits)
        assert all(issuer.claims_of(t)["aud"] == "https://other.example/mcp" for t in issuer.issued)
        wrong_audience = len(issuer.issued)
        direct = httpx2.post(url, headers={"Authorization": f"Bearer {issuer.issued[-1]}",
                                           "Accept": "application/json, text/event-stream"},
                             json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
        assert direct.status_code == 401 and "audience" in direct.json()["error"]["message"]

        # The right resource but not the scope: 403 insufficient_scope; the SDK steps up once,
        # is again granted too little, and gives up.
        issuer.audience_override = None
        issuer.granted_scope = "profile"
        browser = Browser()
        with pytest.raises(BaseException) as insufficient:  # noqa: PT011
            async with oauth_client(url, MemoryStorage(), browser) as c:
                await c.list_tools()
        assert "403" in repr(insufficient.value) or "Forbidden" in repr(insufficient.value), repr(insufficient.value)
        assert len(browser.visits) >= 1
        assert len(issuer.issued) > wrong_audience
        assert all(issuer.claims_of(t)["scope"] == "profile" for t in issuer.issued[wrong_audience:])
        direct = httpx2.post(url, headers={"Authorization": f"Bearer {issuer.issued[-1]}",
                                           "Accept": "application/json, text/event-stream"},
                             json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
        assert direct.status_code == 403
        assert direct.headers["www-authenticate"].startswith(f'Bearer error="insufficient_scope", scope="{SCOPE}"')


def exchange_project(issuer: str, upstream: str, extra: str = "") -> str:
    return f"""
kind: Server
metadata: {{ name: tools }}
spec:
  url: "{upstream}"
  auth:
    tokenExchange:
      endpoint: "{issuer}/token"
      clientId: mcp-proxy
      clientSecret: ${{env:OAUTH_FLOW_EXCHANGE_SECRET}}
      audience: https://tools.example
      scope: tools:read
{extra}---
kind: Project
metadata: {{ name: secured }}
spec:
  servers: [tools]
  auth:
    jwt: {{ issuer: "{issuer}" }}
"""


async def test_the_upstream_gets_an_exchanged_token_never_the_clients(
        tmp_path: Path, issuer: AuthorizationServer, upstream: RecordingUpstream,
        monkeypatch: pytest.MonkeyPatch) -> None:
    issuer.add_client("mcp-proxy", EXCHANGE_SECRET)
    monkeypatch.setenv("OAUTH_FLOW_EXCHANGE_SECRET", EXCHANGE_SECRET)
    home = tmp_path / "home"
    done = apply_spec(home, exchange_project(issuer.issuer, upstream.url))
    assert done.returncode == 0, done.stderr
    with serve(home) as url:
        storage, browser = MemoryStorage(), Browser()
        async with oauth_client(url, storage, browser) as c:
            first = text_of((await c.call_tool("whoami", {})).content[0])
            second = text_of((await c.call_tool("whoami", {})).content[0])
        assert storage.tokens is not None
        client_token = storage.tokens.access_token

        # The upstream saw only the exchanged token: the one the exchange issued, for the
        # configured audience and scope, for the same subject; never the client's token.
        assert first == second and first.startswith("Bearer ")
        exchanged = first.removeprefix("Bearer ")
        assert exchanged != client_token and exchanged in issuer.issued
        claims = issuer.claims_of(exchanged)
        assert claims["sub"] == "alice" and claims["aud"] == "https://tools.example"
        assert claims["scope"] == "tools:read"
        assert upstream.authorizations and all(a == first for a in upstream.authorizations)
        assert not any(client_token in (a or "") for a in upstream.authorizations)

        # The exchange: RFC 8693's grant with the client's verified token as the subject,
        # done once for the principal (cached), the client authenticated.
        assert len(issuer.exchanges) == 1
        [exchange] = issuer.exchanges
        assert exchange["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
        assert exchange["subject_token"] == client_token
        assert exchange["subject_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
        assert exchange["audience"] == "https://tools.example" and exchange["scope"] == "tools:read"

        # A second session of the same principal reuses the cached exchanged token.
        async with oauth_client(url, storage, browser) as c:
            assert text_of((await c.call_tool("whoami", {})).content[0]) == first
        assert len(issuer.exchanges) == 1

        # Another principal gets its own exchanged token.
        issuer.subject = "bob"
        async with oauth_client(url, MemoryStorage(), Browser()) as c:
            bobs = text_of((await c.call_tool("whoami", {})).content[0])
        assert bobs != first and issuer.claims_of(bobs.removeprefix("Bearer "))["sub"] == "bob"
        assert len(issuer.exchanges) == 2


async def test_a_failed_exchange_is_a_clear_error_without_the_token(
        tmp_path: Path, issuer: AuthorizationServer, upstream: RecordingUpstream,
        monkeypatch: pytest.MonkeyPatch) -> None:
    issuer.add_client("mcp-proxy", EXCHANGE_SECRET)
    issuer.refuse_exchange = "invalid_target"
    monkeypatch.setenv("OAUTH_FLOW_EXCHANGE_SECRET", EXCHANGE_SECRET)
    home = tmp_path / "home"
    done = apply_spec(home, exchange_project(issuer.issuer, upstream.url))
    assert done.returncode == 0, done.stderr
    with serve(home) as url:
        storage = MemoryStorage()
        with pytest.raises(BaseException) as failed:  # noqa: PT011 (initialize fails)
            async with oauth_client(url, storage, Browser()) as c:
                await c.list_tools()
        text = repr(failed.value)
        assert "token exchange" in text and "invalid_target" in text and f"{issuer.issuer}/token" in text, text
        assert storage.tokens is not None and storage.tokens.access_token not in text
        # The upstream was never reached without the exchanged token.
        assert upstream.authorizations == []
        log = (Path(__file__).parent / ".logs" / "server-stderr.log").read_text(encoding="utf-8")
        assert "invalid_target" in log and storage.tokens.access_token not in log


async def test_token_exchange_is_checked_at_apply(tmp_path: Path, issuer: AuthorizationServer,
                                                  upstream: RecordingUpstream) -> None:
    home = tmp_path / "home"
    plain_secret = exchange_project(issuer.issuer, upstream.url).replace(
        "${env:OAUTH_FLOW_EXCHANGE_SECRET}", "hunter2")
    refused = apply_spec(home, plain_secret)
    assert refused.returncode != 0 and "auth.tokenExchange.clientSecret" in refused.stderr
    assert "hunter2" not in refused.stderr
    remote = apply_spec(home, exchange_project("http://login.example.com", upstream.url))
    assert remote.returncode != 0 and "auth.tokenExchange.endpoint" in remote.stderr and "loopback" in remote.stderr
    both = apply_spec(home, exchange_project(issuer.issuer, upstream.url, "  headers: { Authorization: Bearer x }\n"))
    assert both.returncode != 0 and "Authorization" in both.stderr
    typo = apply_spec(home, exchange_project(issuer.issuer, upstream.url).replace("clientId", "client_id"))
    assert typo.returncode != 0 and "client_id" in typo.stderr


async def test_without_a_verified_caller_token_there_is_nothing_to_exchange(
        tmp_path: Path, issuer: AuthorizationServer, upstream: RecordingUpstream,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `mcpctl proxy PROJECT` on stdio: the caller is the local user, who has no token.
    issuer.add_client("mcp-proxy", EXCHANGE_SECRET)
    monkeypatch.setenv("OAUTH_FLOW_EXCHANGE_SECRET", EXCHANGE_SECRET)
    home = tmp_path / "home"
    done = apply_spec(home, exchange_project(issuer.issuer, upstream.url))
    assert done.returncode == 0, done.stderr
    params = StdioServerParameters(command=HTTP_PROXY or "", args=["proxy", "secured"],
                                   env={**os.environ, "MCPCTL_HOME": str(home)})
    with pytest.raises(BaseException) as failed:  # noqa: PT011 (initialize fails)
        async with Client(stdio_client(params), read_timeout_seconds=READ_TIMEOUT, cache=None) as c:
            await c.list_tools()
    assert "no verified caller token" in repr(failed.value), repr(failed.value)
    assert issuer.exchanges == [] and upstream.authorizations == []
