"""Server-to-client requests from an HTTP upstream reach the stream of the request that caused
them.

The reference server runs in streamableHttp mode; `$MCP_HTTP_PROXY serve --url ...` is its
proxy, with an HTTP front. A raw HTTP client (it must see which response stream carries what)
makes several `trigger-sampling-request` calls at once: each call's server sends its
`sampling/createMessage` on that call's upstream stream, and the proxy must put it on the
client's stream of the same call, not on whichever stream is newest.

Needs `MCP_HTTP_PROXY` (the mcpctl binary); without it the module is skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import HTTP_PROXY, READ_TIMEOUT, SERVER_JS, ServedProcess, free_port

if not HTTP_PROXY:
    pytest.skip("MCP_HTTP_PROXY is not set: this module tests the proxy's HTTP front", allow_module_level=True)

import anyio  # noqa: E402
import httpx2  # noqa: E402

pytestmark = pytest.mark.anyio

CALLS = 6
PROTOCOL = "2025-11-25"


@pytest.fixture
def proxy_url() -> Iterator[str]:
    """The reference server over HTTP, and the proxy in front of it, serving HTTP too."""
    port = free_port()
    everything = ["node", str(SERVER_JS), "streamableHttp"]
    with ServedProcess(everything, {**os.environ, "PORT": str(port)}, ready="listening on port",
                       failure="node did not start"):
        proxy = [HTTP_PROXY or "", "serve", "--listen", "127.0.0.1:0", "--url", f"http://127.0.0.1:{port}/mcp"]
        with ServedProcess(proxy, dict(os.environ), failure=f"{HTTP_PROXY or ''} did not start") as served:
            assert served.url is not None
            yield served.url


def messages_of(response: httpx2.Response, body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a whole answer: a JSON body or SSE `data:` lines."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [json.loads(body)]
    # A resumable stream starts with a priming event whose data is empty.
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]


async def test_each_server_request_reaches_the_stream_of_the_call_that_caused_it(proxy_url: str) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
        init = await http.post(
            proxy_url,
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {"sampling": {}},
                    "clientInfo": {"name": "stream-placement", "version": "1.0.0"},
                },
            },
        )
        assert init.status_code == 200, init.text
        assert messages_of(init, init.text)[0]["result"]["protocolVersion"], init.text
        headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
        headers["MCP-Protocol-Version"] = PROTOCOL
        note = await http.post(proxy_url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert note.status_code == 202, note.text

        asked: dict[int, list[str]] = {i: [] for i in range(CALLS)}
        answers: dict[int, dict[str, Any]] = {}

        async def call(i: int) -> None:
            request = {
                "jsonrpc": "2.0",
                "id": 100 + i,
                "method": "tools/call",
                "params": {"name": "trigger-sampling-request", "arguments": {"prompt": f"call {i}"}},
            }
            async with http.stream("POST", proxy_url, headers=headers, json=request) as response:
                assert response.status_code == 200
                is_json = response.headers.get("content-type", "").startswith("application/json")
                async for line in response.aiter_lines():
                    if is_json:
                        messages = [json.loads(line)] if line.strip() else []
                    elif line.startswith("data:") and line[5:].strip():
                        messages = [json.loads(line[5:])]
                    else:
                        continue
                    for message in messages:
                        if message.get("method") == "sampling/createMessage":
                            asked[i].append(message["params"]["messages"][0]["content"]["text"])
                            reply = {
                                "jsonrpc": "2.0",
                                "id": message["id"],
                                "result": {
                                    "role": "assistant",
                                    "content": {"type": "text", "text": f"answered on stream {i}"},
                                    "model": "stream-placement",
                                },
                            }
                            posted = await http.post(proxy_url, headers=headers, json=reply)
                            assert posted.status_code == 202, posted.text
                        elif message.get("id") == 100 + i:
                            answers[i] = message
                            return

        with anyio.fail_after(READ_TIMEOUT):
            async with anyio.create_task_group() as group:
                for i in range(CALLS):
                    group.start_soon(call, i)

        for i in range(CALLS):
            assert asked[i] == [f"Resource trigger-sampling-request context: call {i}"], asked
            text = answers[i]["result"]["content"][0]["text"]
            assert f"answered on stream {i}" in text, answers[i]
        await http.delete(proxy_url, headers=headers)
