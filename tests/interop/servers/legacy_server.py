"""Fixture server for test_eras.py: the `dual_server.py` definitions served with the
2025-11-25 `initialize` handshake only (the SDK's `serve_loop`, not the dual-era loop).

It answers `server/discover` with -32601 and ignores the 2026-07-28 envelope, like any
pre-2026 server; an `initialize` asking for 2026-07-28 is answered with 2025-11-25.

Run: `python legacy_server.py` (stdio).
"""

from __future__ import annotations

import anyio
from dual_server import mcp
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server


async def main() -> None:
    low = mcp._lowlevel_server  # the low-level Server behind MCPServer
    async with stdio_server() as (read, write):
        async with low.lifespan(low) as state:
            await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
