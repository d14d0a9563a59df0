"""Fixture server for test_reverse_bridge.py: a server that changes protocol era across a restart.

The first start (no file at STATE yet) writes STATE and serves 2026-07-28 only
(`modern_server.py`); every later start serves the 2025-11-25 handshake only
(`legacy_server.py`). The `crash` tool ends the process, so the proxy restarts it on the
client's next request and must find out its era again.

Run: `python era_flip_server.py STATE` (stdio).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dual_server import mcp  # noqa: E402


@mcp.tool()
def crash() -> str:
    """Exits the server process at once (status 3)."""
    os._exit(3)


if __name__ == "__main__":
    state = Path(sys.argv[1])
    if state.exists():
        import legacy_server

        anyio.run(legacy_server.main)
    else:
        state.write_text("started once\n", encoding="utf-8")
        import modern_server

        anyio.run(modern_server.main)
