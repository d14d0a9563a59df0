"""The reference server over streamable HTTP as the proxy's upstream.

`node server-everything streamableHttp` listens on a free port; the official Python client talks
to `mcpctl proxy --url http://127.0.0.1:PORT/mcp` on stdio. The proxy is the HTTP client: session
ids, protocol version header, SSE answers, and a server restart (its sessions gone) handled
without the client noticing.

Needs `MCP_PROXY` (the mcpctl binary); without it the module is skipped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import anyio
import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs mcpctl against an HTTP upstream", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import BASE_TOOLS, EVENT_TIMEOUT, READ_TIMEOUT, SERVER_JS, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Everything:
    """server-everything in streamableHttp mode on `port`, until `stop`."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc = subprocess.Popen(
            ["node", str(SERVER_JS), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                if "listening on port" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(EVENT_TIMEOUT) or self.proc.poll() is not None:
            self.stop()
            pytest.fail("server-everything (streamableHttp) did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def everything() -> Iterator[Everything]:
    server = Everything(free_port())
    yield server
    server.stop()


def client_for(port: int, mode: str = "legacy") -> Client:
    params = StdioServerParameters(
        command=PROXY,
        args=["proxy", "--url", f"http://127.0.0.1:{port}/mcp", "--header", "X-Interop: yes"],
        env=dict(os.environ),
    )
    return Client(
        stdio_client(params),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        client_info=types.Implementation(name="http-upstream-interop", version="1.0.0"),
        cache=None,
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_reference_server_over_http_behind_the_proxy(everything: Everything, mode: str) -> None:
    async with client_for(everything.port, mode) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert BASE_TOOLS <= tools
        echoed = await client.call_tool("echo", {"message": "over http"})
        assert text_of(echoed.content[0]) == "Echo: over http"
        total = await client.call_tool("get-sum", {"a": 2, "b": 40})
        assert "42" in text_of(total.content[0])
        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        long = await client.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=on_progress
        )
        assert not long.is_error
        assert len(progress) == 3, progress
        resources = (await client.list_resources()).resources
        read = await client.read_resource(resources[0].uri)
        assert read.contents


async def test_a_restarted_server_gets_a_new_session_unseen_by_the_client(everything: Everything) -> None:
    async with client_for(everything.port) as client:
        assert text_of((await client.call_tool("echo", {"message": "before"})).content[0]) == "Echo: before"
        everything.stop()
        restarted = Everything(everything.port)
        try:
            after = await client.call_tool("echo", {"message": "after"})
            assert text_of(after.content[0]) == "Echo: after"
        finally:
            restarted.stop()



async def test_requests_of_one_session_go_out_side_by_side() -> None:
    # The server answers each request with one JSON body, so its response headers come only
    # with the result: `release` must reach it while `wait_for_release` is still waiting.
    port = free_port()
    script = os.path.join(os.path.dirname(__file__), "servers", "json_http_server.py")
    with ServedProcess([sys.executable, script, str(port)], failure="json_http_server.py did not start"):
        async with client_for(port) as client:
            results: list[str] = []

            async def wait() -> None:
                answered = await client.call_tool("wait_for_release", {})
                results.append(text_of(answered.content[0]))

            with anyio.fail_after(READ_TIMEOUT):
                async with anyio.create_task_group() as group:
                    group.start_soon(wait)
                    # Another request while the wait is open: it must be answered now.
                    while text_of((await client.call_tool("waiting_calls", {})).content[0]) != "1":
                        pass
                    released = await client.call_tool("release", {})
                    assert text_of(released.content[0]) == "ok"
            assert results == ["released"]
