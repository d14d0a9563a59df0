"""`mcpctl serve PROJECT` as an OAuth 2.1 resource server, against an authorization
server the test runs on loopback (`tests/fixtures/authorization_server.py`: OpenID metadata, a
rotating RSA JWK set, tokens minted with PyJWT).

The project's `spec.auth.jwt` names only the issuer: the proxy discovers the JWK set from its
OpenID configuration. Checked: the protected-resource metadata (RFC 9728, both paths); `401`
with `resource_metadata`; a token for another audience refused (the audience defaults to the
resource, RFC 8707); `403 insufficient_scope`; the official client's session with a good token;
a rotated key accepted without a restart; unknown `kid`s not making the proxy fetch the keys
again (rate limit).

Needs `MCP_HTTP_PROXY` (the mcpctl binary); without it the module is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import HTTP_PROXY, LOG_DIR, READ_TIMEOUT, SERVER_JS, ServedProcess, text_of

if not HTTP_PROXY:
    pytest.skip("MCP_HTTP_PROXY is not set: test_oauth.py tests `mcpctl serve PROJECT`", allow_module_level=True)

import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from authorization_server import AuthorizationServer  # noqa: E402

pytestmark = pytest.mark.anyio

SCOPE = "mcp:tools"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "oauth-test", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def secured_project(issuer: str, extra: str = "") -> str:
    """The project `secured`: server-everything behind JWTs from `issuer`, plus `extra` auth lines."""
    return f"""
kind: Server
metadata: {{ name: everything }}
spec:
  command: node
  args: ["{SERVER_JS}", stdio]
---
kind: Project
metadata: {{ name: secured }}
spec:
  servers: [everything]
  auth:
    jwt: {{ issuer: "{issuer}" }}
    oauth: {{ scopes: [{SCOPE}] }}
{extra}"""


def apply_spec(home: Path, yaml: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`mcpctl apply` of `yaml` (written beside `home`) with `MCPCTL_HOME=home` and `env`."""
    spec = home.parent / "project.yaml"
    spec.write_text(yaml, encoding="utf-8")
    return subprocess.run([HTTP_PROXY or "", "apply", "-f", str(spec)],
                          env={**os.environ, "MCPCTL_HOME": str(home), **(env or {})},
                          capture_output=True, text=True, timeout=60)


def apply(home: Path, issuer: str, extra: str = "") -> subprocess.CompletedProcess[str]:
    return apply_spec(home, secured_project(issuer, extra))


@contextmanager
def serve(home: Path) -> Iterator[str]:
    """`mcpctl serve secured --listen 127.0.0.1:0`: its URL. Stopped however the test ends."""
    LOG_DIR.mkdir(exist_ok=True)
    errlog = open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8")  # noqa: SIM115
    errlog.write("\n===== test_oauth =====\n")
    try:
        argv = [HTTP_PROXY or "", "serve", "secured", "--listen", "127.0.0.1:0"]
        env = {**os.environ, "MCPCTL_HOME": str(home), "MCPCTL_LOG": "info"}
        with ServedProcess(argv, env, errlog, failure="mcpctl serve did not print `listening on URL`") as serving:
            assert serving.url is not None
            yield serving.url
    finally:
        errlog.close()


@asynccontextmanager
async def client(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60))

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with http, streamable_http_client(url, http_client=http) as (read_stream, write_stream):
            yield read_stream, write_stream

    c = Client(transport(), read_timeout_seconds=READ_TIMEOUT,
               client_info=types.Implementation(name="oauth-test", version="1"), cache=None)
    async with c:
        yield c


def post(url: str, token: str | None) -> httpx2.Response:
    headers = dict(HEADERS)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.post(url, json=INITIALIZE, headers=headers, timeout=30)


async def test_a_project_is_an_oauth_protected_resource(tmp_path: Path, issuer: AuthorizationServer) -> None:
    home = tmp_path / "home"
    done = apply(home, issuer.issuer)
    assert done.returncode == 0, done.stderr
    with serve(home) as url:
        origin = url.removesuffix("/mcp")
        metadata_url = f"{origin}/.well-known/oauth-protected-resource/mcp"
        # The metadata, at the path-suffixed URL and the bare one.
        for where in (metadata_url, f"{origin}/.well-known/oauth-protected-resource"):
            metadata = httpx2.get(where, timeout=30)
            assert metadata.status_code == 200, where
            assert metadata.json() == {
                "resource": url,
                "authorization_servers": [issuer.issuer],
                "scopes_supported": [SCOPE],
                "bearer_methods_supported": ["header"],
            }
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        # No token: 401 pointing to the metadata.
        missing = post(url, None)
        assert missing.status_code == 401
        assert f'resource_metadata="{metadata_url}"' in missing.headers["www-authenticate"]

        # A token for another resource: refused, the audience is the resource by default.
        elsewhere = post(url, issuer.mint(aud="https://other.example/mcp", scope=SCOPE))
        assert elsewhere.status_code == 401
        challenge = elsewhere.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge and f'resource_metadata="{metadata_url}"' in challenge
        assert "audience" in elsewhere.json()["error"]["message"]
        assert post(url, issuer.mint(scope=SCOPE)).status_code == 401  # no `aud` at all

        # The right audience without the scope: 403 insufficient_scope naming it.
        unscoped = post(url, issuer.mint(aud=url, scope="profile"))
        assert unscoped.status_code == 403
        assert unscoped.headers["www-authenticate"].startswith(f'Bearer error="insufficient_scope", scope="{SCOPE}"')

        # A good token (scope as `scp` works too): the official client's session.
        assert post(url, issuer.mint(aud=url, scp=[SCOPE])).status_code == 200
        async with client(url, issuer.mint(aud=[url, "other"], scope=f"openid {SCOPE}")) as c:
            echoed = await c.call_tool("echo", {"message": "with a token"})
            assert text_of(echoed.content[0]) == "Echo: with a token"
        fetched = issuer.jwks_fetches
        assert fetched == 1, "the keys are fetched once at start, then cached"

        # The issuer rotates its key: a token of the new key is accepted, no restart.
        old = issuer.mint(aud=url, scope=SCOPE)
        new_kid = issuer.rotate()
        rotated = issuer.mint(aud=url, scope=SCOPE)
        assert post(url, rotated).status_code == 200
        assert issuer.jwks_fetches == fetched + 1
        async with client(url, rotated) as c:
            assert any(t.name == "echo" for t in (await c.list_tools()).tools)
        # The old key is gone from the set, so from the proxy too.
        assert post(url, old).status_code == 401
        assert new_kid == issuer.kid

        # A flood of unknown kids (a key the issuer never published): refused, and the keys
        # were fetched a moment ago, so not fetched again.
        stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        for n in range(20):
            forged = issuer.mint(aud=url, scope=SCOPE, kid=f"unknown-{n}", key=stranger)
            refused = post(url, forged)
            assert refused.status_code == 401
            assert "resource_metadata" in refused.headers["www-authenticate"]
        assert issuer.jwks_fetches == fetched + 1


async def test_auth_is_checked_at_apply(tmp_path: Path, issuer: AuthorizationServer) -> None:
    home = tmp_path / "home"
    remote = apply(home, "http://idp.example.com")
    assert remote.returncode != 0
    assert "auth.jwt.issuer" in remote.stderr and "loopback" in remote.stderr
    unknown = apply(home, issuer.issuer, "    mtls: { clientCA: /ca.pem }\n")
    assert unknown.returncode != 0 and "clientCA" in unknown.stderr
