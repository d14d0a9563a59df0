"""A project of two servers pages its merged lists on its own.

Two scripted upstreams that page their own `tools/list` (25 tools a page) hold 202 tools
together, more than one merged page (100 or more items, whole upstream pages). The official Python
client walks `list_tools(cursor=...)` until the end and must see every tool exactly once; a cursor
the proxy did not hand out is refused with -32602 naming it; a method the merger does not know goes
where its params' `name` says, else is refused with -32601.

Over stdio (`mcpctl proxy PROJECT`) when `MCP_PROXY` names the mcpctl binary, over streamable HTTP
(`mcpctl serve PROJECT`) when `MCP_HTTP_PROXY` does; both connect modes (legacy handshake and the
2026-07-28 probe).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

STDIO = os.environ.get("MCP_PROXY")
HTTP = os.environ.get("MCP_HTTP_PROXY")
if not STDIO and not HTTP:
    pytest.skip("neither MCP_PROXY nor MCP_HTTP_PROXY is set: this module runs mcpctl projects", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import READ_TIMEOUT, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "tests" / "fixtures" / "scripted_upstream.py"
RawRequest = types.Request[dict[str, Any] | None, str]

# alpha: `t` and tool-0..129, beta: `t` and tool-0..69, both 25 tools a page.
COUNTS = {"alpha": 130, "beta": 70}

PROJECT_YAML = "".join(
    f"""kind: Server
metadata: {{ name: {name} }}
spec:
  command: {sys.executable}
  args: ["{SCRIPTED}"]
  env: {{ SCRIPTED_NAME: {name}, SCRIPTED_TOOL_COUNT: "{count}", SCRIPTED_PAGE_SIZE: "25" }}
---
"""
    for name, count in COUNTS.items()
) + """kind: Project
metadata: { name: paged }
spec:
  servers: [alpha, beta]
---
kind: Project
metadata: { name: paged-model }
spec:
  servers: [alpha, beta]
  proxyModel: paginate
"""

TRANSPORTS = [t for t, binary in (("stdio", STDIO), ("http", HTTP)) if binary]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    spec = tmp_path / "project.yaml"
    spec.write_text(PROJECT_YAML, encoding="utf-8")
    binary = STDIO or HTTP or ""
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home")}
    done = subprocess.run([binary, "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return tmp_path / "home"


def served(home: Path, project: str) -> ServedProcess:
    """`mcpctl serve PROJECT --listen 127.0.0.1:0` as a child process, and its URL."""
    return ServedProcess([HTTP or "", "serve", project, "--listen", "127.0.0.1:0"],
                         {**os.environ, "MCPCTL_HOME": str(home)}, failure="mcpctl serve did not start")


@asynccontextmanager
async def connect(home: Path, transport: str, mode: str, project: str = "paged") -> AsyncIterator[Client]:
    info = types.Implementation(name="project-pages", version="1.0.0")
    if transport == "stdio":
        env = {**os.environ, "MCPCTL_HOME": str(home)}
        params = StdioServerParameters(command=STDIO or "", args=["proxy", project], env=env)
        async with Client(
            stdio_client(params), mode=mode, read_timeout_seconds=READ_TIMEOUT, client_info=info, cache=None
        ) as client:
            yield client
        return
    with served(home, project) as serving:
        assert serving.url is not None
        async with Client(
            streamable_http_client(serving.url),
            mode=mode,
            read_timeout_seconds=READ_TIMEOUT,
            client_info=info,
            cache=None,
        ) as client:
            yield client


def expected() -> list[str]:
    return [f"{name}__{tool}" for name, count in COUNTS.items() for tool in ["t", *(f"tool-{i}" for i in range(count))]]


async def walk(client: Client) -> list[list[str]]:
    """Every page of `tools/list`, following `nextCursor` to the end: each page's names."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        pages.append([tool.name for tool in page.tools])
        cursor = page.next_cursor
        assert len(pages) < 50, "the pages never end"
        if cursor is None:
            return pages


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_client_walks_every_page_and_sees_every_tool_once(home: Path, transport: str, mode: str) -> None:
    async with connect(home, transport, mode) as client:
        pages = await walk(client)
        assert len(pages) > 1, [len(p) for p in pages]
        # Whole upstream pages (25 tools) until a page holds 100 or more.
        assert all(100 <= len(p) < 125 for p in pages[:-1]), [len(p) for p in pages]
        names = [name for page in pages for name in page]
        assert names == expected(), "every tool exactly once, server after server"

        called = await client.call_tool("beta__tool-69", {})
        assert text_of(called.content[0]) == "called tool-69 by beta"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_models_synthetic_tool_comes_once_on_the_last_page(home: Path, transport: str) -> None:
    async with connect(home, transport, "legacy", "paged-model") as client:
        pages = await walk(client)
        assert len(pages) > 1
        names = [name for page in pages for name in page]
        assert names == [*expected(), "read_page"], "paginate's read_page once, after the servers' tools"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_cursor_the_proxy_did_not_hand_out_is_refused(home: Path, transport: str) -> None:
    async with connect(home, transport, "legacy") as client:
        first = await client.list_tools()
        assert first.next_cursor
        for forged in ["page-25", "forged-cursor", first.next_cursor[:-2] + "AA"]:
            with pytest.raises(MCPError) as info:
                await client.list_tools(cursor=forged)
            assert info.value.code == INVALID_PARAMS, info.value
            assert "invalid cursor" in info.value.message and forged[:10] in info.value.message, info.value.message
        with pytest.raises(MCPError) as info:
            await client.list_prompts(cursor=first.next_cursor)
        assert info.value.code == INVALID_PARAMS, "a tools/list cursor is not a prompts/list one"
        # The real cursor still goes on, and the servers never saw a cursor they did not write.
        second = await client.list_tools(cursor=first.next_cursor)
        assert second.tools and second.tools[0].name not in {tool.name for tool in first.tools}
        for name in COUNTS:
            state = await client.session.send_request(
                RawRequest(method="state", params={"name": f"{name}__state"}), TypeAdapter(dict[str, Any])
            )
            assert state["bad_cursors"] == [], state


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_unknown_method_is_routed_by_its_name_or_refused(home: Path, transport: str) -> None:
    async with connect(home, transport, "legacy") as client:
        echoed = await client.session.send_request(
            RawRequest(method="custom/echo", params={"name": "beta__thing", "n": 1}), TypeAdapter(dict[str, Any])
        )
        assert echoed["echo"] == {"name": "thing", "n": 1}, echoed
        with pytest.raises(MCPError) as info:
            await client.session.send_request(
                RawRequest(method="custom/echo", params={"n": 1}), TypeAdapter(dict[str, Any])
            )
        assert info.value.code == METHOD_NOT_FOUND, info.value
        assert "`custom/echo`" in info.value.message and "alpha, beta" in info.value.message, info.value.message
