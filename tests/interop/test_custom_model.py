"""A model written in a downstream crate, run by that crate's own binary.

`examples/guarded` depends on `mcp-middleware` alone and composes two models:
`budget` (a per-session tool-call budget in `State`, its size from `Config`, and a synthetic
`budget_left` tool) and `redact` (`transform_content` that blanks words starting with `sk-`).
Here the official Python SDK client talks to its binary, `guarded-proxy`, in front of the
official reference server.

Needs `GUARDED_PROXY` (the built binary); without it the module is skipped.
"""

from __future__ import annotations

import os

import pytest

GUARDED = os.environ.get("GUARDED_PROXY")
if not GUARDED:
    pytest.skip("GUARDED_PROXY is not set: this module runs the example crate's binary", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import BASE_TOOLS, READ_TIMEOUT, SERVER_JS, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.anyio


def first_text(result: types.CallToolResult) -> str:
    return text_of(result.content[0])

MAX_CALLS = 3


def guarded_client(mode: str) -> Client:
    params = StdioServerParameters(
        command=GUARDED,
        args=["--max-calls", str(MAX_CALLS), "--", "node", str(SERVER_JS), "stdio"],
        env=dict(os.environ),
    )
    return Client(
        stdio_client(params),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        client_info=types.Implementation(name="guarded-interop", version="1.0.0"),
        cache=None,
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_composed_model_budgets_redacts_and_adds_its_tool(mode: str) -> None:
    async with guarded_client(mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert BASE_TOOLS <= set(tools), "the upstream's tools are all there"
        assert "budget_left" in tools, "the synthetic tool is listed"
        assert tools["budget_left"].description == "How many tool calls this session has left."

        left = await client.call_tool("budget_left", {})
        assert first_text(left) == str(MAX_CALLS)

        echoed = await client.call_tool("echo", {"message": "key sk-live-123 inside"})
        assert not echoed.is_error
        assert "sk-live" not in first_text(echoed) and "[redacted]" in first_text(echoed), first_text(echoed)

        for _ in range(MAX_CALLS - 1):
            assert not (await client.call_tool("get-sum", {"a": 1, "b": 2})).is_error
        spent = await client.call_tool("echo", {"message": "one too many"})
        assert spent.is_error, "the budget stops the call before the server"
        assert "budget" in first_text(spent)
        left = await client.call_tool("budget_left", {})
        assert first_text(left) == "0"


async def test_each_session_gets_its_own_budget() -> None:
    async with guarded_client("legacy") as first, guarded_client("legacy") as second:
        await first.call_tool("get-sum", {"a": 1, "b": 1})
        await first.call_tool("get-sum", {"a": 1, "b": 1})
        assert first_text(await first.call_tool("budget_left", {})) == str(MAX_CALLS - 2)
        assert first_text(await second.call_tool("budget_left", {})) == str(MAX_CALLS)
