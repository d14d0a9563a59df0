"""The content models (paginate, section-split, default) seen by the official
Python SDK client, through `mcpctl proxy --model ...` in front of the official reference server.

Needs `MCP_PROXY` (the built `mcpctl`); without it the module is skipped.
"""

from __future__ import annotations

import os
import re

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs the proxy's content models", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import BASE_TOOLS, READ_TIMEOUT, SERVER_JS, server_doc, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.anyio

FOOTER = "\n\n[page "
NEXT = re.compile(r'\{"(cursor|id)": "([^"]+)"\}\]$')
LONG = "".join(f"{n:04d} żółw 🐢 日本語 naïve\n" for n in range(300)) + "x" * 3000


def proxied(mode: str, model: str, *sets: str) -> Client:
    args = ["proxy", "--model", model]
    for setting in sets:
        args += ["--set", setting]
    params = StdioServerParameters(
        command=PROXY,
        args=[*args, "--", "node", str(SERVER_JS), "stdio"],
        env=dict(os.environ),
    )
    return Client(
        stdio_client(params),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        client_info=types.Implementation(name="content-interop", version="1.0.0"),
        cache=None,
    )


def only_text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    assert len(result.content) == 1, result
    return text_of(result.content[0])


def split_page(page: str) -> tuple[str, tuple[str, str] | None]:
    at = page.rfind(FOOTER)
    assert at >= 0, page[:500]
    found = NEXT.search(page[at:])
    return page[:at], (found.group(1), found.group(2)) if found else None


async def read_pages(client: Client, first: str, tool: str) -> tuple[str, int]:
    body, next_page = split_page(first)
    joined, pages = [body], 1
    while next_page:
        key, value = next_page
        body, next_page = split_page(only_text(await client.call_tool(tool, {key: value})))
        joined.append(body)
        pages += 1
    return "".join(joined), pages


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_paginate_pages_a_long_echo_and_read_page_gives_back_the_rest(mode: str) -> None:
    async with proxied(mode, "paginate", "paginate.pageBytes=1024") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert BASE_TOOLS <= set(tools)
        assert "cursor" in tools["read_page"].input_schema["properties"]

        first = only_text(await client.call_tool("echo", {"message": LONG}))
        assert "read_page" in first and len(first.encode()) < 1300, first[-300:]
        joined, pages = await read_pages(client, first, "read_page")
        assert joined == f"Echo: {LONG}"
        assert pages > 10

        short = only_text(await client.call_tool("echo", {"message": "short"}))
        assert short == "Echo: short", "a page or less passes unchanged"
        image = await client.call_tool("get-tiny-image", {})
        assert any(isinstance(block, types.ImageContent) for block in image.content)

        bad = await client.call_tool("read_page", {"cursor": "no-such-cursor"})
        assert bad.is_error and "not a read_page cursor" in text_of(bad.content[0])


async def read_tree(client: Client, section_id: str) -> str:
    """A section's text: read whole, page by page, or part by part through its own table."""
    text = only_text(await client.call_tool("read_section", {"id": section_id}))
    if text.startswith(f"Section {section_id} "):
        return "".join([await read_tree(client, row) for row in toc_ids(text)])
    if FOOTER in text and NEXT.search(text):
        return (await read_pages(client, text, "read_section"))[0]
    return text


def toc_ids(toc: str) -> list[str]:
    rows = toc.split("\nid ", 1)[1].splitlines()[1:]
    return [row.split()[0] for row in rows if row.strip()]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_section_split_gives_a_markdown_resource_a_table_of_contents(mode: str) -> None:
    settings = ("section-split.thresholdBytes=2048", "section-split.pageBytes=2048")
    async with proxied(mode, "section-split", *settings) as client:
        uri = "demo://resource/static/document/structure.md"
        result = await client.read_resource(uri)
        content = result.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert content.mime_type == "text/markdown"
        toc = content.text
        assert toc.startswith("This Markdown document"), toc[:300]
        assert "# Everything Server - Project Structure" in toc
        whole = "".join([await read_tree(client, section) for section in toc_ids(toc)])
        assert whole == server_doc("structure.md"), "the sections, read back, are the document"

        small = await client.read_resource("demo://resource/static/document/extension.md")
        assert small.contents[0].text == server_doc("extension.md"), "small documents pass unchanged"


async def test_default_is_gated_then_open_then_pages() -> None:
    async with proxied("legacy", "default", "paginate.pageBytes=1024") as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["begin_session"]
        refused = await client.call_tool("echo", {"message": LONG})
        assert refused.is_error and "begin_session" in text_of(refused.content[0])

        opened = await client.call_tool("begin_session", {"intent": "echo a long text"})
        assert not opened.is_error, opened
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert BASE_TOOLS <= names and "read_page" in names and "begin_session" not in names

        first = only_text(await client.call_tool("echo", {"message": LONG}))
        joined, pages = await read_pages(client, first, "read_page")
        assert joined == f"Echo: {LONG}" and pages > 10
