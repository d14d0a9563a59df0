"""Fixture server for test_reverse_bridge.py: the dual-era fixture's definitions, served 2026-07-28 only.

The Python SDK (`mcp` 2.3.0) has no public switch for a 2026-07-28-only stdio server (its
`MCPServer.run()` serves both eras, the first request decides), so this runs the SDK's own
modern serving loop (`mcp.server.runner._serve_modern_stream`) on stdio: every request must
carry the per-request `_meta` envelope, `server/discover` answers, and `initialize` is refused
with -32022 exactly as the SDK refuses it on a connection serving 2026-07-28.

`--extras` adds tools that drive what only a 2026-07-28 server does through
`subscriptions/listen` (resource updates, list changes) and per-request logging; without it
the tool set is the dual-era fixture's, so test_eras.py's checks apply unchanged.

Run: `python modern_server.py [--extras]` (stdio).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import anyio
from mcp.server.mcpserver import Context
from mcp.server.runner import _serve_modern_stream
from mcp.server.stdio import stdio_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dual_server  # noqa: E402

mcp = dual_server.mcp
NOTES_URI = "modern://notes"
_notes = ["first note"]

if "--extras" in sys.argv:

    @mcp.resource(NOTES_URI, name="notes", mime_type="text/plain")
    def notes() -> str:
        return "\n".join(_notes)

    @mcp.tool()
    async def add_note(text: str, ctx: Context) -> str:
        """Appends a note and announces that `modern://notes` changed (on subscriptions/listen)."""
        _notes.append(text)
        await ctx.notify_resource_updated(NOTES_URI)
        return f"{len(_notes)} notes"

    @mcp.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Registers a new tool `name` and announces the tools list changed."""

        def extra() -> str:
            return f"{name} ran"

        mcp.add_tool(extra, name=name, description=f"added at run time as {name}")
        await ctx.notify_tools_changed()
        return f"added {name}"

    @mcp.tool()
    async def log_each(ctx: Context) -> str:
        """Logs one message at each of debug, info and warning (what reaches the client follows its level)."""
        levels: list[Literal["debug", "info", "warning"]] = ["debug", "info", "warning"]
        for level in levels:
            await ctx.log(level, f"log at {level}")
        return "logged"

    _cancelled_waits: list[str] = []

    @mcp.tool()
    async def wait_forever(ctx: Context) -> str:
        """Reports one progress notification (so the caller knows it runs), then sleeps until
        cancelled, which it records for `cancelled_waits` (over HTTP the only sign a 2026-07-28
        server gets of a cancellation is the closed response stream)."""
        await ctx.report_progress(1, None, "waiting")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            _cancelled_waits.append("cancelled")
            raise
        return "never"

    @mcp.tool()
    def cancelled_waits() -> str:
        """How many `wait_forever` calls this server saw cancelled."""
        return str(len(_cancelled_waits))


async def main() -> None:
    server = mcp._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        async with server.lifespan(server) as state:
            await _serve_modern_stream(server, read_stream, write_stream, lifespan_state=state, raise_exceptions=False)


if __name__ == "__main__":
    anyio.run(main)
