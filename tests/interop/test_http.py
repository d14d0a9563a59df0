"""The proxy's streamable HTTP front, seen by the official Python client.

The rest of the suite runs over HTTP as it is when `MCP_HTTP_PROXY` is set (conftest's
`tapped_http`); this module checks what only HTTP has: sessions (an id per client, ended with
DELETE when the client closes), several clients on one proxy at once, and a 2026-07-28
client, which needs no session, bridged to the reference server (2025-11-25 only).

Needs `MCP_HTTP_PROXY` (a binary run as `BINARY serve --listen 127.0.0.1:0 -- CMD...`);
without it the module is skipped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from conftest import HTTP_PROXY, LOG_DIR, READ_TIMEOUT, EventLog, WireMsg, _TapRead, _TapWrite, server_params, text_of

if not HTTP_PROXY:
    pytest.skip("MCP_HTTP_PROXY is not set: test_http.py tests the proxy's HTTP front", allow_module_level=True)

import anyio  # noqa: E402
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import HttpProxy  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.session import ClientRequestContext  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
SAMPLED = "sampled over http"


@asynccontextmanager
async def proxy(label: str) -> AsyncIterator[HttpProxy]:
    """The reference server behind one HTTP proxy process."""
    LOG_DIR.mkdir(exist_ok=True)
    with open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"\n===== {label} =====\n")
        params = server_params()
        running = HttpProxy([params.command, *params.args], dict(params.env or {}), errlog)
        try:
            yield running
        finally:
            running.stop()


@asynccontextmanager
async def client(url: str, mode: str, wire: EventLog[WireMsg], seen: list[httpx2.Response]) -> AsyncIterator[Client]:
    """A `Client` over streamable HTTP whose HTTP responses are recorded in `seen`."""

    async def on_response(response: httpx2.Response) -> None:
        seen.append(response)

    async def on_sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLED),
            model="http-model",
            stop_reason="endTurn",
        )

    async def on_list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///interop/http", name="HTTP Workspace")])

    http = create_mcp_http_client()
    http.event_hooks = {"request": [], "response": [on_response]}

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with http, streamable_http_client(url, http_client=http) as (read_stream, write_stream):
            yield _TapRead(read_stream, wire), _TapWrite(write_stream, wire)

    c = Client(
        transport(),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        sampling_callback=on_sampling,
        list_roots_callback=on_list_roots,
        client_info=types.Implementation(name="mcp-http-tests", version="1.0.0"),
        cache=None,
    )
    async with c:
        yield c


def session_ids(seen: list[httpx2.Response]) -> set[str]:
    return {r.headers["mcp-session-id"] for r in seen if "mcp-session-id" in r.headers}


async def test_each_client_gets_a_session_that_ends_when_it_closes() -> None:
    async with proxy("test_http sessions") as running:
        assert running.url is not None
        seen_a: list[httpx2.Response] = []
        seen_b: list[httpx2.Response] = []
        wire_a: EventLog[WireMsg] = EventLog("wire a")
        wire_b: EventLog[WireMsg] = EventLog("wire b")
        async with client(running.url, "legacy", wire_a, seen_a) as a, client(running.url, "legacy", wire_b, seen_b) as b:
            (tools_a, tools_b) = (await a.list_tools(), await b.list_tools())
            assert {t.name for t in tools_a.tools} == {t.name for t in tools_b.tools}
            echoed = await a.call_tool("echo", {"message": "from a"})
            assert text_of(echoed.content[0]) == "Echo: from a"
            assert (await b.call_tool("echo", {"message": "from b"})).is_error is False
        (sid_a,) = session_ids(seen_a)
        (sid_b,) = session_ids(seen_b)
        assert sid_a != sid_b
        # Closing sent DELETE; the ids now name no session.
        assert any(r.request.method == "DELETE" and r.status_code == 200 for r in seen_a)
        async with httpx2.AsyncClient() as raw:
            for sid in (sid_a, sid_b):
                gone = await raw.post(
                    running.url,
                    headers={"accept": "application/json, text/event-stream", "mcp-session-id": sid},
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                )
                assert gone.status_code == 404, gone.text
                assert "no open session" in gone.json()["error"]["message"]


async def test_a_2026_client_needs_no_session_and_is_bridged() -> None:
    async with proxy("test_http 2026-07-28 client") as running:
        assert running.url is not None
        seen: list[httpx2.Response] = []
        wire: EventLog[WireMsg] = EventLog("wire")
        async with client(running.url, MODERN, wire, seen) as c:
            assert c.protocol_version == MODERN
            tools = {t.name for t in (await c.list_tools()).tools}
            assert {"echo", "get-sum", "trigger-sampling-request"} <= tools
            echoed = await c.call_tool("echo", {"message": "héllo ✓"})
            assert text_of(echoed.content[0]) == "Echo: héllo ✓"
            # The server's sampling request comes back as an input round the client answers.
            sampled = await c.call_tool("trigger-sampling-request", {"prompt": "6*7?", "maxTokens": 5})
            assert sampled.is_error is False, sampled
            assert SAMPLED in text_of(sampled.content[0])
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            done = await c.call_tool(
                "trigger-long-running-operation", {"duration": 0.2, "steps": 2}, progress_callback=on_progress
            )
            assert "completed" in text_of(done.content[0])
            with anyio.fail_after(10):
                while len(progress) < 2:
                    await anyio.sleep(0.05)
            assert progress == [1.0, 2.0]
        assert not session_ids(seen), "a 2026-07-28 client gets no session id"
        posts = [r for r in seen if r.request.method == "POST"]
        assert posts and all(r.request.headers.get("mcp-protocol-version") == MODERN for r in posts)
        assert not [r for r in seen if r.request.method == "GET"], "no GET stream at 2026-07-28"
        rounds = [
            m for m in wire.items
            if m.direction == "in" and m.is_response and (m.data.get("result") or {}).get("resultType") == "input_required"
        ]
        assert rounds, "sampling travelled as an input round"
        assert "sampling/createMessage" in json.dumps(rounds[0].data)
