"""Item 1: every tool is listed, and every tool is called with valid arguments.

Tools that need a server->client request (sampling, elicitation, roots) are exercised in
test_client_features.py, the long-running one in test_progress_cancel.py and the task-only
one in test_tasks.py; here each of them is still called once and checked.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from conftest import BASE_TOOLS, ENV_MARKER_NAME, ENV_MARKER_VALUE, Interop, text_of, tiny_image_from_source

pytestmark = pytest.mark.anyio

# Registered after `initialized`, gated on the client's capabilities (registerConditionalTools).
CONDITIONAL_TOOLS = {
    "get-roots-list",  # client has roots
    "trigger-elicitation-request",  # client has elicitation
    "trigger-url-elicitation",  # client has elicitation.url
    "trigger-sampling-request",  # client has sampling
    "simulate-research-query",  # always (task-only tool, taskSupport=required)
}
# Need the client to advertise the 2025-11-25 `tasks` capability for sampling/elicitation
# requests.  The Python SDK 2.3.0 client never advertises `tasks` (tasks/* are deliberately
# absent from its 2025-11-25 method table), so the server does not register these two.
TASK_CLIENT_TOOLS = {"trigger-sampling-request-async", "trigger-elicitation-request-async"}

WEATHER = {
    "New York": {"temperature": 33, "conditions": "Cloudy", "humidity": 82},
    "Chicago": {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82},
    "Los Angeles": {"temperature": 73, "conditions": "Sunny / Clear", "humidity": 48},
}


async def list_all_tools(h: Interop) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(50):
        page = await h.c.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise AssertionError("tools/list pagination never ended")


async def test_every_tool_is_listed(shared: Interop) -> None:
    tools = await list_all_tools(shared)
    names = [t.name for t in tools]
    assert len(names) == len(set(names)), f"duplicate tools: {names}"
    assert set(names) == BASE_TOOLS | CONDITIONAL_TOOLS
    assert not set(names) & TASK_CLIENT_TOOLS

    by_name = {t.name: t for t in tools}
    for tool in tools:
        assert tool.input_schema["type"] == "object", tool.name
        assert tool.title, f"{tool.name} has a title on this server"
        assert tool.description, tool.name
    assert by_name["echo"].title == "Echo Tool"
    assert by_name["echo"].input_schema["properties"]["message"]["type"] == "string"
    assert by_name["echo"].input_schema["required"] == ["message"]
    assert by_name["echo"].annotations is not None
    assert by_name["echo"].annotations.read_only_hint is True
    assert by_name["gzip-file-as-resource"].annotations.open_world_hint is True
    assert by_name["get-sum"].input_schema["required"] == ["a", "b"]
    out = by_name["get-structured-content"].output_schema
    assert out is not None and set(out["properties"]) == {"temperature", "conditions", "humidity"}
    assert set(out["required"]) == {"temperature", "conditions", "humidity"}
    assert by_name["get-structured-content"].input_schema["properties"]["location"]["enum"] == list(WEATHER)
    assert by_name["simulate-research-query"].execution is not None
    assert by_name["simulate-research-query"].execution.task_support == "required"


async def test_echo(shared: Interop) -> None:
    message = "héllo interop ✓ \"quoted\" \\ back\nslash"
    result = await shared.c.call_tool("echo", {"message": message})
    assert result.is_error is False
    assert [text_of(b) for b in result.content] == [f"Echo: {message}"]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (2, 3, "The sum of 2 and 3 is 5."),
        (2.5, -7, "The sum of 2.5 and -7 is -4.5."),
        (0.1, 0.2, "The sum of 0.1 and 0.2 is 0.30000000000000004."),  # computed in JS doubles
    ],
)
async def test_get_sum(shared: Interop, a: float, b: float, expected: str) -> None:
    result = await shared.c.call_tool("get-sum", {"a": a, "b": b})
    assert result.is_error is False
    assert [text_of(block) for block in result.content] == [expected]


async def test_get_env_reaches_the_server_process(shared: Interop) -> None:
    result = await shared.c.call_tool("get-env", {})
    env = json.loads(text_of(result.content[0]))
    assert isinstance(env, dict)
    # The variable is set in the environment the client launches the command with; seeing
    # it here proves it reached the server (and, with MCP_PROXY, was handed on by the proxy).
    assert env.get(ENV_MARKER_NAME) == ENV_MARKER_VALUE
    assert "PATH" in env


async def test_get_tiny_image(shared: Interop) -> None:
    result = await shared.c.call_tool("get-tiny-image", {})
    assert result.is_error is False
    assert len(result.content) == 3
    assert text_of(result.content[0]) == "Here's the image you requested:"
    image = result.content[1]
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png"
    assert image.data == tiny_image_from_source()
    raw = base64.b64decode(image.data, validate=True)
    assert raw.startswith(b"\x89PNG\r\n\x1a\n")
    assert text_of(result.content[2]) == "The image above is the MCP logo."


@pytest.mark.parametrize(
    ("message_type", "text", "priority", "audience"),
    [
        ("error", "Error: Operation failed", 1.0, ["user", "assistant"]),
        ("success", "Operation completed successfully", 0.7, ["user"]),
        ("debug", "Debug: Cache hit ratio 0.95, latency 150ms", 0.3, ["assistant"]),
    ],
)
async def test_get_annotated_message(
    shared: Interop, message_type: str, text: str, priority: float, audience: list[str]
) -> None:
    result = await shared.c.call_tool("get-annotated-message", {"messageType": message_type, "includeImage": True})
    assert result.is_error is False
    assert len(result.content) == 2
    first, image = result.content
    assert text_of(first) == text
    assert first.annotations is not None
    assert first.annotations.priority == priority
    assert first.annotations.audience == audience
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png" and image.data == tiny_image_from_source()
    assert image.annotations is not None and image.annotations.priority == 0.5
    assert image.annotations.audience == ["user"]

    plain = await shared.c.call_tool("get-annotated-message", {"messageType": message_type})
    assert [text_of(b) for b in plain.content] == [text]  # includeImage defaults to false


async def test_get_resource_links(shared: Interop) -> None:
    result = await shared.c.call_tool("get-resource-links", {"count": 4})
    assert result.is_error is False
    assert text_of(result.content[0]) == "Here are 4 resource links to resources available in this server:"
    links = result.content[1:]
    assert len(links) == 4
    for resource_id, link in enumerate(links, start=1):
        assert isinstance(link, types.ResourceLink)
        # Even ids are text resources, odd ids blob resources (the server's own convention).
        kind = "text" if resource_id % 2 == 0 else "blob"
        assert link.uri == f"demo://resource/dynamic/{kind}/{resource_id}"
        assert link.name == f"{kind.capitalize()} Resource {resource_id}"
        assert link.mime_type == "text/plain"
        # The server picks the wording from the mimeType, which is text/plain for blobs too.
        assert link.description == f"Resource {resource_id}: plaintext resource"
    # A link is dereferenceable through resources/read.
    read = await shared.c.read_resource(links[1].uri)
    assert read.contents[0].uri == "demo://resource/dynamic/text/2"
    assert read.contents[0].text.startswith("Resource 2: This is a plaintext resource created at ")


@pytest.mark.parametrize("resource_type", ["Text", "Blob"])
async def test_get_resource_reference_embeds_a_resource(shared: Interop, resource_type: str) -> None:
    result = await shared.c.call_tool("get-resource-reference", {"resourceType": resource_type, "resourceId": 5})
    assert result.is_error is False
    assert len(result.content) == 3
    assert text_of(result.content[0]) == "Returning resource reference for Resource 5:"
    embedded = result.content[1]
    assert isinstance(embedded, types.EmbeddedResource)
    uri = f"demo://resource/dynamic/{resource_type.lower()}/5"
    assert embedded.resource.uri == uri
    assert embedded.resource.mime_type == "text/plain"
    if resource_type == "Text":
        assert isinstance(embedded.resource, types.TextResourceContents)
        assert embedded.resource.text.startswith("Resource 5: This is a plaintext resource created at ")
    else:
        assert isinstance(embedded.resource, types.BlobResourceContents)
        decoded = base64.b64decode(embedded.resource.blob, validate=True).decode()
        assert decoded.startswith("Resource 5: This is a base64 blob created at ")
    assert text_of(result.content[2]) == f"You can access this resource using the URI: {uri}"


@pytest.mark.parametrize("location", list(WEATHER))
async def test_get_structured_content_matches_output_schema(shared: Interop, location: str) -> None:
    tools = {t.name: t for t in await list_all_tools(shared)}
    schema = tools["get-structured-content"].output_schema
    result = await shared.c.call_tool("get-structured-content", {"location": location})
    assert result.is_error is False
    assert result.structured_content == WEATHER[location]
    jsonschema.validate(result.structured_content, schema)
    # Backwards-compatible text block carries the same JSON.
    assert json.loads(text_of(result.content[0])) == WEATHER[location]


@pytest.mark.parametrize("output_type", ["resource", "resourceLink"])
async def test_gzip_file_as_resource(shared: Interop, output_type: str) -> None:
    payload = ("interop payload äöü " * 20).encode()
    data_uri = "data:text/plain;base64," + base64.b64encode(payload).decode()
    name = f"interop-{output_type}.txt.gz"
    uri = f"demo://resource/session/{name}"
    result = await shared.c.call_tool(
        "gzip-file-as-resource", {"name": name, "data": data_uri, "outputType": output_type}
    )
    assert result.is_error is False, result.content
    assert len(result.content) == 1
    block = result.content[0]
    if output_type == "resource":
        assert isinstance(block, types.EmbeddedResource)
        assert isinstance(block.resource, types.BlobResourceContents)
        assert block.resource.uri == uri and block.resource.mime_type == "application/gzip"
        blob = block.resource.blob
    else:
        assert isinstance(block, types.ResourceLink)
        assert block.uri == uri and block.name == name and block.mime_type == "application/gzip"
        read = await shared.c.read_resource(uri)
        assert isinstance(read.contents[0], types.BlobResourceContents)
        blob = read.contents[0].blob
    assert gzip.decompress(base64.b64decode(blob, validate=True)) == payload


async def test_toggle_tools_report_their_state(shared: Interop) -> None:
    for tool, started, stopped in [
        ("toggle-simulated-logging", "Started simulated, random-leveled logging", "Stopped simulated logging"),
        (
            "toggle-subscriber-updates",
            "Started simulated resource updated notifications",
            "Stopped simulated resource updates",
        ),
    ]:
        on = await shared.c.call_tool(tool, {})
        assert text_of(on.content[0]).startswith(started)
        off = await shared.c.call_tool(tool, {})
        assert text_of(off.content[0]).startswith(stopped)


async def test_trigger_long_running_operation_short(shared: Interop) -> None:
    result = await shared.c.call_tool("trigger-long-running-operation", {"duration": 0.2, "steps": 2})
    assert text_of(result.content[0]) == "Long running operation completed. Duration: 0.2 seconds, Steps: 2."


# ----------------------------------------------------------------------- error results


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error is True, f"expected an error result, got {result!r}"
    assert len(result.content) == 1
    return text_of(result.content[0])


async def test_error_result_invalid_arguments(shared: Interop) -> None:
    result = await shared.c.call_tool("get-sum", {"a": "two", "b": 3})
    text = error_text(result)
    assert text.startswith("MCP error -32602: Input validation error: Invalid arguments for tool get-sum")


async def test_error_result_invalid_enum(shared: Interop) -> None:
    result = await shared.c.call_tool("get-resource-reference", {"resourceType": "Video", "resourceId": 1})
    assert "Invalid arguments for tool get-resource-reference" in error_text(result)


async def test_error_result_from_tool_handler(shared: Interop) -> None:
    # A data: URI that is not base64 decodes fine; an unsupported scheme makes the handler throw.
    result = await shared.c.call_tool("gzip-file-as-resource", {"name": "x.gz", "data": "ftp://localhost/x"})
    text = error_text(result)
    assert text.startswith("Error processing file ftp://localhost/x: Unsupported URL protocol")


async def test_error_result_task_only_tool_called_plainly(shared: Interop) -> None:
    result = await shared.c.call_tool("simulate-research-query", {"topic": "interop"})
    assert error_text(result) == (
        "MCP error -32601: Tool simulate-research-query requires task augmentation (taskSupport: 'required')"
    )


async def test_error_result_unknown_tool(shared: Interop) -> None:
    # The TS SDK's McpServer reports an unknown tool as a tool *result* with isError=true
    # (not as a JSON-RPC error); the wire must carry exactly that.
    result = await shared.c.call_tool("no-such-tool", {"x": 1})
    assert error_text(result) == "MCP error -32602: Tool no-such-tool not found"
    request_id = shared.last_request_id("tools/call", lambda m: m.params.get("name") == "no-such-tool")
    (reply,) = shared.responses_to(request_id)
    raw: dict[str, Any] = reply.data["result"]
    assert raw["isError"] is True
