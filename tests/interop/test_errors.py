"""Item 10: JSON-RPC errors are relayed with their code, message and data.

Each test checks the error as the SDK raises it (`MCPError`) *and* the raw error object on
the wire.  Note: an unknown *tool* is not a JSON-RPC error on this server (TS SDK
McpServer answers with an isError result) - see test_tools.py.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from conftest import Interop
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED
from pydantic import TypeAdapter

pytestmark = pytest.mark.anyio

RawRequest = types.Request[dict[str, Any] | None, str]


def wire_error(h: Interop, method: str) -> dict[str, Any]:
    request_id = h.last_request_id(method)
    (reply,) = h.responses_to(request_id)
    assert "result" not in reply.data
    return reply.data["error"]


async def expect_error(h: Interop, method: str, call: Any, code: int, message: str) -> MCPError:
    with pytest.raises(MCPError) as info:
        await call
    assert info.value.code == code
    assert info.value.message == message
    raw = wire_error(h, method)
    assert raw["code"] == code and raw["message"] == message
    return info.value


async def test_unknown_method(shared: Interop) -> None:
    call = shared.c.session.send_request(RawRequest(method="interop/no-such-method", params={}), TypeAdapter(dict))
    await expect_error(shared, "interop/no-such-method", call, METHOD_NOT_FOUND, "Method not found")


async def test_unknown_resource(shared: Interop) -> None:
    uri = "demo://resource/no-such-thing"
    await expect_error(
        shared,
        "resources/read",
        shared.c.read_resource(uri),
        INVALID_PARAMS,
        f"MCP error -32602: Resource {uri} not found",
    )


async def test_template_resource_handler_error(shared: Interop) -> None:
    uri = "demo://resource/dynamic/text/not-a-number"
    await expect_error(
        shared, "resources/read", shared.c.read_resource(uri), INTERNAL_ERROR, f"Unknown resource: {uri}"
    )


async def test_unknown_prompt(shared: Interop) -> None:
    await expect_error(
        shared,
        "prompts/get",
        shared.c.get_prompt("no-such-prompt"),
        INVALID_PARAMS,
        "MCP error -32602: Prompt no-such-prompt not found",
    )


async def test_prompt_missing_required_argument(shared: Interop) -> None:
    with pytest.raises(MCPError) as info:
        await shared.c.get_prompt("args-prompt", {"state": "Ohio"})
    assert info.value.code == INVALID_PARAMS
    assert info.value.message.startswith("MCP error -32602: Invalid arguments for prompt args-prompt: ")
    assert "city" in info.value.message
    assert wire_error(shared, "prompts/get")["message"] == info.value.message


async def test_prompt_handler_error(shared: Interop) -> None:
    await expect_error(
        shared,
        "prompts/get",
        shared.c.get_prompt("resource-prompt", {"resourceType": "Video", "resourceId": "1"}),
        INTERNAL_ERROR,
        "Invalid resourceType: Video. Must be Text or Blob.",
    )


async def test_completion_unknown_prompt(shared: Interop) -> None:
    ref = types.PromptReference(type="ref/prompt", name="no-such-prompt")
    await expect_error(
        shared,
        "completion/complete",
        shared.c.complete(ref, {"name": "x", "value": ""}),
        INVALID_PARAMS,
        "MCP error -32602: Prompt no-such-prompt not found",
    )


async def test_completion_unknown_resource_template(shared: Interop) -> None:
    ref = types.ResourceTemplateReference(type="ref/resource", uri="demo://nothing/{id}")
    await expect_error(
        shared,
        "completion/complete",
        shared.c.complete(ref, {"name": "id", "value": "1"}),
        INVALID_PARAMS,
        "MCP error -32602: Resource template demo://nothing/{id} not found",
    )


async def test_url_elicitation_required_error_with_data(shared: Interop) -> None:
    # trigger-url-elicitation with errorPath=true throws UrlElicitationRequiredError, which
    # McpServer lets through as a JSON-RPC error (-32042) carrying the elicitations as data.
    args = {"url": "https://example.com/interop/denied", "errorPath": True, "elicitationId": "err-path-1"}
    err = await expect_error(
        shared,
        "tools/call",
        shared.c.call_tool("trigger-url-elicitation", args),
        URL_ELICITATION_REQUIRED,
        "MCP error -32042: This request requires browser-based authorization.",
    )
    (elicitation,) = err.data["elicitations"]
    assert elicitation["mode"] == "url"
    assert elicitation["url"] == "https://modelcontextprotocol.io"
    assert elicitation["message"] == "Open this link to satisfy the prerequisite, then retry the request."
    assert elicitation["elicitationId"]
    assert wire_error(shared, "tools/call")["data"] == err.data

    # Retrying the same call is recognised by the server and proceeds via the request path.
    result = await shared.c.call_tool("trigger-url-elicitation", args)
    assert result.is_error is False
    assert result.content[0].text.startswith("✅ User completed the URL elicitation flow.\nElicitation ID: err-path-1")
