"""Item 4: resources - list, templates, read text/blob, subscribe/updated/unsubscribe.

The server exposes each file of its dist/docs/ folder as a static text resource and two
URI templates (dynamic text and blob resources).  It does not paginate (TS SDK McpServer
returns everything at once); the listing helpers still follow `nextCursor` so a proxy that
pages would be handled.
"""

from __future__ import annotations

import base64

import anyio
import mcp_types as types
import pytest
from conftest import SERVER_PKG, Interop, server_doc, text_of

pytestmark = pytest.mark.anyio

DOCS = sorted(p.name for p in (SERVER_PKG / "dist" / "docs").iterdir() if p.is_file())
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"


async def list_all_resources(h: Interop) -> list[types.Resource]:
    out: list[types.Resource] = []
    cursor: str | None = None
    for _ in range(50):
        page = await h.c.list_resources(cursor=cursor)
        out.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return out
    raise AssertionError("resources/list pagination never ended")


async def list_all_templates(h: Interop) -> list[types.ResourceTemplate]:
    out: list[types.ResourceTemplate] = []
    cursor: str | None = None
    for _ in range(50):
        page = await h.c.list_resource_templates(cursor=cursor)
        out.extend(page.resource_templates)
        cursor = page.next_cursor
        if cursor is None:
            return out
    raise AssertionError("resources/templates/list pagination never ended")


async def test_list_resources(shared: Interop) -> None:
    assert len(DOCS) >= 5
    resources = await list_all_resources(shared)
    static = {r.uri: r for r in resources if r.uri.startswith("demo://resource/static/")}
    assert sorted(static) == sorted(f"demo://resource/static/document/{name}" for name in DOCS)
    features = static["demo://resource/static/document/features.md"]
    assert features.name == "features.md"
    assert features.mime_type == "text/markdown"
    assert features.description == "Static document file exposed from /docs: features.md"
    # Templates are not listed as resources.
    assert not [r for r in resources if r.uri.startswith("demo://resource/dynamic/")]


async def test_list_resource_templates(shared: Interop) -> None:
    templates = {t.uri_template: t for t in await list_all_templates(shared)}
    assert set(templates) == {TEXT_TEMPLATE, BLOB_TEMPLATE}
    assert templates[TEXT_TEMPLATE].name == "Dynamic Text Resource"
    assert templates[TEXT_TEMPLATE].mime_type == "text/plain"
    assert templates[BLOB_TEMPLATE].name == "Dynamic Blob Resource"
    assert templates[BLOB_TEMPLATE].mime_type == "application/octet-stream"
    assert "{resourceId}" in (templates[BLOB_TEMPLATE].description or "")


@pytest.mark.parametrize("doc", ["features.md", "instructions.md", "architecture.md"])
async def test_read_static_text_resource(shared: Interop, doc: str) -> None:
    uri = f"demo://resource/static/document/{doc}"
    result = await shared.c.read_resource(uri)
    assert len(result.contents) == 1
    content = result.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == uri
    assert content.mime_type == "text/markdown"
    assert content.text == server_doc(doc)  # byte-for-byte the file on disk


async def test_read_template_text_resource(shared: Interop) -> None:
    result = await shared.c.read_resource("demo://resource/dynamic/text/42")
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == "demo://resource/dynamic/text/42"
    assert content.mime_type == "text/plain"
    assert content.text.startswith("Resource 42: This is a plaintext resource created at ")


async def test_read_template_blob_resource(shared: Interop) -> None:
    result = await shared.c.read_resource("demo://resource/dynamic/blob/7")
    (content,) = result.contents
    assert isinstance(content, types.BlobResourceContents)
    assert content.uri == "demo://resource/dynamic/blob/7"
    decoded = base64.b64decode(content.blob, validate=True).decode()
    assert decoded.startswith("Resource 7: This is a base64 blob created at ")


async def test_subscribe_updated_unsubscribe(mcp: Interop) -> None:
    """Subscribe to A and B, get updates; unsubscribe A; later updates only for B.

    `toggle-subscriber-updates` sends `notifications/resources/updated` for every URI the
    session is subscribed to right away (then every 5 s), in subscription order.
    """
    uri_a = "demo://resource/dynamic/text/1"
    uri_b = "demo://resource/static/document/features.md"

    def updated(uri: str):
        return lambda n: isinstance(n, types.ResourceUpdatedNotification) and n.params.uri == uri

    await mcp.c.subscribe_resource(uri_a)
    await mcp.c.subscribe_resource(uri_b)
    start = mcp.notifications.mark()
    on = await mcp.c.call_tool("toggle-subscriber-updates", {})
    assert text_of(on.content[0]).startswith("Started simulated resource updated notifications")
    await mcp.notifications.wait_for(updated(uri_a), start=start, what=f"resources/updated for {uri_a}")
    await mcp.notifications.wait_for(updated(uri_b), start=start, what=f"resources/updated for {uri_b}")

    off = await mcp.c.call_tool("toggle-subscriber-updates", {})
    assert text_of(off.content[0]).startswith("Stopped simulated resource updates")

    await mcp.c.unsubscribe_resource(uri_a)
    assert len(mcp.outbound("resources/unsubscribe")) == 1
    start = mcp.notifications.mark()
    await mcp.c.call_tool("toggle-subscriber-updates", {})  # on again: immediate burst
    await mcp.notifications.wait_for(updated(uri_b), start=start, what=f"resources/updated for {uri_b}")
    # A's update would have been sent before B's (insertion order), so it is not coming.
    assert mcp.notifications.matching(updated(uri_a), start) == []
    await mcp.c.call_tool("toggle-subscriber-updates", {})  # off, so the server exits promptly

    # Both subscribe requests were acknowledged with an (empty) result on the wire.
    for req in mcp.outbound("resources/subscribe"):
        (reply,) = mcp.responses_to(req.id)
        assert reply.data["result"] == {}


async def test_subscribe_is_acknowledged_with_a_log_message(mcp: Interop) -> None:
    # The server logs every subscribe at level info before it answers.
    start = mcp.logs.mark()
    uri = "demo://resource/dynamic/blob/3"
    await mcp.c.subscribe_resource(uri)
    log = await mcp.wait_log(lambda p: "Received Subscribe Resource request" in str(p.data), start=start)
    assert log.level == "info"
    assert str(log.data).startswith(f"Received Subscribe Resource request for URI: {uri}")
    with anyio.fail_after(20):
        await mcp.c.unsubscribe_resource(uri)
    await mcp.wait_log(lambda p: str(p.data).startswith(f"Received Unsubscribe Resource request: {uri}"), start=start)
