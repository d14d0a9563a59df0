"""Identity and TLS on the proxy's HTTP front, seen by the official Python client.

`$MCP_HTTP_PROXY serve --tls-cert ... --tokens FILE` (and `--client-ca`) in front of the
reference server: the client reaches it over HTTPS, trusting the test CA, with a bearer token
in its headers (or a client certificate), in both its legacy and auto modes; without a
credential it is refused with 401. Keys and certificates come from
`mcp-middleware/tests/fixtures/identity` (`scripts/gen-identity-fixtures`).

Needs `MCP_HTTP_PROXY`; without it the module is skipped.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import HTTP_PROXY, LOG_DIR, READ_TIMEOUT, ServedProcess, server_params, text_of

if not HTTP_PROXY:
    pytest.skip("MCP_HTTP_PROXY is not set: test_identity.py tests the proxy's HTTP front", allow_module_level=True)

import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT  # noqa: E402

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parent.parent.parent / "mcp-middleware" / "tests" / "fixtures" / "identity"
TOKEN = "interop-token-of-alice-0123456789"
JWT_SECRET = "interop-jwt-secret-of-at-least-32-bytes"
ISSUER = "https://idp.internal.example:8443"
AUDIENCE = "mcp-internal-audience"


@asynccontextmanager
async def served(label: str, *flags: str) -> AsyncIterator[str]:
    """`$MCP_HTTP_PROXY serve` with `flags`, in front of the reference server: its URL."""
    LOG_DIR.mkdir(exist_ok=True)
    params = server_params()
    with open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"\n===== {label} =====\n")
        argv = [HTTP_PROXY or "", "serve", "--listen", "127.0.0.1:0", *flags, "--", params.command, *params.args]
        with ServedProcess(argv, dict(params.env or {}), errlog,
                           failure=f"{HTTP_PROXY} serve did not print `listening on URL`") as serving:
            assert serving.url is not None
            yield serving.url


def tls_context(certificate: str | None = None) -> ssl.SSLContext:
    """Trusts the test CA; presents `certificate` (`alice`) when given."""
    context = ssl.create_default_context(cafile=str(FIXTURES / "ca.pem"))
    if certificate:
        context.load_cert_chain(str(FIXTURES / f"{certificate}.pem"), str(FIXTURES / f"{certificate}.key"))
    return context


@asynccontextmanager
async def client(url: str, mode: str, context: ssl.SSLContext, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    # As `create_mcp_http_client` makes it, with the test CA (and certificate): the factory takes
    # no TLS settings.
    http = httpx2.AsyncClient(
        verify=context,
        headers=headers or {},
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
    )

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with http, streamable_http_client(url, http_client=http) as (read_stream, write_stream):
            yield read_stream, write_stream

    c = Client(
        transport(),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        client_info=types.Implementation(name="mcp-identity-tests", version="1.0.0"),
        cache=None,
    )
    async with c:
        yield c


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_bearer_token_over_https(tmp_path: Path, mode: str) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {TOKEN}\n")
    flags = ["--tls-cert", str(FIXTURES / "server.pem"), "--tls-key", str(FIXTURES / "server.key"), "--tokens", str(tokens)]
    async with served(f"test_identity bearer {mode}", *flags) as url:
        assert url.startswith("https://")
        async with client(url, mode, tls_context(), {"Authorization": f"Bearer {TOKEN}"}) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            assert "echo" in tools
            echoed = await c.call_tool("echo", {"message": "over https"})
            assert text_of(echoed.content[0]) == "Echo: over https"

        async with httpx2.AsyncClient(verify=tls_context()) as raw:
            refused = await raw.post(
                url,
                headers={"accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.json()["error"]["code"] == -32030


async def test_a_client_certificate_over_mtls() -> None:
    flags = [
        "--tls-cert",
        str(FIXTURES / "server.pem"),
        "--tls-key",
        str(FIXTURES / "server.key"),
        "--client-ca",
        str(FIXTURES / "ca.pem"),
    ]
    async with served("test_identity mtls", *flags) as url:
        async with client(url, "legacy", tls_context("alice")) as c:
            echoed = await c.call_tool("echo", {"message": "with a certificate"})
            assert text_of(echoed.content[0]) == "Echo: with a certificate"
        # Without a certificate the handshake is refused. Under TLS 1.3 the server's alert may
        # arrive only when the client reads or closes the connection, so the refusal is either
        # httpx's error from the request or the ssl module's from closing the client.
        with pytest.raises((httpx2.HTTPError, ssl.SSLError)):
            async with httpx2.AsyncClient(verify=tls_context()) as raw:
                await raw.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(header: str, claims: dict[str, Any], secret: str = JWT_SECRET) -> str:
    """A JWT over exactly the `header` text (as an attacker writes it) and `claims`."""
    signed = f"{b64url(header.encode())}.{b64url(json.dumps(claims).encode())}"
    tag = hmac.new(secret.encode(), signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{b64url(tag)}"


def claims(iss: str = ISSUER, sub: str = "alice", aud: str = AUDIENCE) -> dict[str, Any]:
    return {"iss": iss, "sub": sub, "aud": aud, "exp": int(time.time()) + 600}


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
ACCEPT = {"accept": "application/json, text/event-stream"}


def jwt_flags(tmp_path: Path, *extra: str) -> list[str]:
    secret = tmp_path / "jwt-secret"
    secret.write_text(JWT_SECRET + "\n")
    return [
        "--tls-cert",
        str(FIXTURES / "server.pem"),
        "--tls-key",
        str(FIXTURES / "server.key"),
        "--jwt-secret-file",
        str(secret),
        *extra,
    ]


async def test_jwts_are_read_strictly_and_refusals_echo_nothing(tmp_path: Path) -> None:
    flags = jwt_flags(tmp_path, "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    async with served("test_identity jwt strict", *flags) as url:
        valid = hs256('{"alg":"HS256","typ":"at+jwt"}', claims())
        async with client(url, "legacy", tls_context(), {"Authorization": f"Bearer {valid}"}) as c:
            echoed = await c.call_tool("echo", {"message": "with a JWT"})
            assert text_of(echoed.content[0]) == "Echo: with a JWT"

        kid = "attacker-chosen-kid-77"
        attacks = {
            "duplicate alg": hs256('{"alg":"none","alg":"HS256"}', claims()),
            "foreign typ": hs256('{"alg":"HS256","typ":"JOSE+JSON"}', claims()),
            "attacker kid": hs256(f'{{"alg":"HS256","kid":"{kid}"}}', claims(), "another-secret-of-thirty-two-bytes!!"),
            "wrong issuer": hs256('{"alg":"HS256"}', claims(iss="https://evil.example")),
            "wrong audience": hs256('{"alg":"HS256"}', claims(aud="evil-audience")),
            "padded": hs256('{"alg":"HS256"}', claims()) + "=",
        }
        async with httpx2.AsyncClient(verify=tls_context()) as raw:
            for label, token in attacks.items():
                refused = await raw.post(url, headers={**ACCEPT, "authorization": f"Bearer {token}"}, json=INITIALIZE)
                assert refused.status_code == 401, (label, refused.text)
                assert refused.json()["error"]["code"] == -32030, label
                for leaked in (ISSUER, AUDIENCE, kid, "evil.example", "evil-audience", JWT_SECRET):
                    assert leaked not in refused.text, (label, leaked, refused.text)


async def test_principals_that_used_to_collide_do_not_share_sessions(tmp_path: Path) -> None:
    async with served("test_identity jwt principals", *jwt_flags(tmp_path)) as url:
        port = hs256('{"alg":"HS256"}', claims(iss="https://idp:8443", sub="x", aud="mcp"))
        colon = hs256('{"alg":"HS256"}', claims(iss="https://idp", sub="8443:x", aud="mcp"))
        async with httpx2.AsyncClient(verify=tls_context()) as raw:
            started = await raw.post(url, headers={**ACCEPT, "authorization": f"Bearer {port}"}, json=INITIALIZE)
            assert started.status_code == 200, started.text
            session = started.headers["mcp-session-id"]
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            mine = await raw.post(url, headers={**ACCEPT, "authorization": f"Bearer {port}", "mcp-session-id": session}, json=listing)
            assert mine.status_code == 200, mine.text
            theirs = await raw.post(url, headers={**ACCEPT, "authorization": f"Bearer {colon}", "mcp-session-id": session}, json=listing)
            assert theirs.status_code == 404, theirs.text


def raw_post(url: str, headers: list[tuple[str, str]]) -> tuple[int, str]:
    """POSTs `initialize` with exactly `headers` (HTTP clients refuse to send two `Host`s)."""
    import socket

    authority = url.split("://", 1)[1].split("/", 1)[0]
    host, port = authority.rsplit(":", 1)
    body = json.dumps(INITIALIZE).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers)
    request = (
        f"POST /mcp HTTP/1.1\r\n{head}connection: close\r\ncontent-type: application/json\r\n"
        f"accept: application/json, text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    with socket.create_connection((host, int(port)), timeout=READ_TIMEOUT) as tcp:
        with tls_context().wrap_socket(tcp, server_hostname="localhost") as tls:
            tls.sendall(request)
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
    status_line, _, rest = answer.decode("utf-8", "replace").partition("\r\n")
    return int(status_line.split()[1]), rest


async def test_a_duplicated_host_or_origin_is_refused() -> None:
    flags = ["--tls-cert", str(FIXTURES / "server.pem"), "--tls-key", str(FIXTURES / "server.key")]
    async with served("test_identity duplicate host", *flags) as url:
        authority = url.split("://", 1)[1].split("/", 1)[0]
        status, _ = raw_post(url, [("host", authority), ("origin", "http://localhost")])
        assert status == 200
        status, text = raw_post(url, [("host", authority), ("host", "evil.example.com")])
        assert status == 400 and "more than one `Host`" in text, text
        status, text = raw_post(url, [("host", authority), ("origin", "http://localhost"), ("origin", "http://evil.example.com")])
        assert status == 400 and "more than one `Origin`" in text, text
