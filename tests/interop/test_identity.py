"""Identity and TLS on the proxy's HTTP front, seen by the official Python client.

`$MCP_HTTP_PROXY serve --tls-cert ... --tokens FILE` (and `--client-ca`) in front of the
reference server: the client reaches it over HTTPS, trusting the test CA, with a bearer token
in its headers (or a client certificate), in both its legacy and auto modes; without a
credential it is refused with 401. Keys and certificates come from
`mcp-middleware/tests/fixtures/identity` (`scripts/gen-identity-fixtures`).

Needs `MCP_HTTP_PROXY`; without it the module is skipped.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import EVENT_TIMEOUT, HTTP_PROXY, LOG_DIR, READ_TIMEOUT, server_params, text_of

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


@asynccontextmanager
async def served(label: str, *flags: str) -> AsyncIterator[str]:
    """`$MCP_HTTP_PROXY serve` with `flags`, in front of the reference server: its URL."""
    LOG_DIR.mkdir(exist_ok=True)
    params = server_params()
    with open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"\n===== {label} =====\n")
        proc = subprocess.Popen(
            [HTTP_PROXY or "", "serve", "--listen", "127.0.0.1:0", *flags, "--", params.command, *params.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=dict(params.env or {}),
            text=True,
        )
        found = threading.Event()
        url: list[str] = []

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                if not url and line.startswith("listening on "):
                    url.append(line.removeprefix("listening on ").strip())
                    found.set()
                errlog.write(line)
                errlog.flush()
            found.set()

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        try:
            if not found.wait(EVENT_TIMEOUT) or not url:
                pytest.fail(f"{HTTP_PROXY} serve did not print `listening on URL` (exit status {proc.poll()})")
            yield url[0]
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            thread.join(5)


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
        async with httpx2.AsyncClient(verify=tls_context()) as raw:
            with pytest.raises(httpx2.HTTPError):
                await raw.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
