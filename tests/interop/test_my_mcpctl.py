"""A crate's own mcpctl: `examples/my-mcpctl` is `fn main() { mcpctl::run() }` with
one model of its own, `focused` (`extends = [gate, paginate]` plus a `session_intent` tool).

The official Python SDK client talks to `my-mcpctl proxy --model focused` in front of the
official reference server: the stock gate and paginate do their work inside the custom model,
and its own tool reads the gate's state.

Needs `MY_MCPCTL` (the built binary); without it the module is skipped.
"""

from __future__ import annotations

import os

import pytest

MY_MCPCTL = os.environ.get("MY_MCPCTL")
if not MY_MCPCTL:
    pytest.skip("MY_MCPCTL is not set: this module runs the example crate's binary", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import BASE_TOOLS, READ_TIMEOUT, SERVER_JS, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.anyio

PAGE_BYTES = 256


def focused_client(mode: str) -> Client:
    params = StdioServerParameters(
        command=MY_MCPCTL,
        args=[
            "proxy", "--model", "focused", "--set", f"paginate.pageBytes={PAGE_BYTES}",
            "--", "node", str(SERVER_JS), "stdio",
        ],
        env=dict(os.environ),
    )
    return Client(
        stdio_client(params),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        client_info=types.Implementation(name="my-mcpctl-interop", version="1.0.0"),
        cache=None,
    )


def first_text(result: types.CallToolResult) -> str:
    return text_of(result.content[0])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_custom_model_gates_pages_and_recalls_the_intent(mode: str) -> None:
    async with focused_client(mode) as client:
        gated = {tool.name for tool in (await client.list_tools()).tools}
        assert gated == {"begin_session", "session_intent"}, gated

        assert "not open yet" in first_text(await client.call_tool("session_intent", {}))
        refused = await client.call_tool("echo", {"message": "hi"})
        assert refused.is_error and "begin_session" in first_text(refused)

        opened = await client.call_tool("begin_session", {"intent": "check the echo tool"})
        assert not opened.is_error, first_text(opened)
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert BASE_TOOLS <= tools, "the upstream's tools are back"
        assert {"read_page", "session_intent"} <= tools, tools

        assert first_text(await client.call_tool("session_intent", {})) == "check the echo tool"

        long = " ".join(f"word{i}" for i in range(200))
        paged = await client.call_tool("echo", {"message": long})
        assert not paged.is_error
        assert "read_page" in first_text(paged), "paginate pages large results inside focused"
