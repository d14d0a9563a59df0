"""Fixture server for test_reverse_bridge.py: `modern_server.py --extras` over streamable HTTP, 2026-07-28 only.

The Python SDK's streamable HTTP manager routes by the `MCP-Protocol-Version` header: a
2026-07-28 one goes to its single-exchange 2026-07-28 entry, anything else to the 2025-11-25
session transport. A 2026-07-28-only server has no such transport, so this wraps the SDK's
app: an `initialize` is answered with -32022 (what the SDK's own 2026-07-28 stdio loop
answers), everything else reaches the SDK as it came.

Run: `python modern_http_server.py PORT`; prints `listening on URL` on stderr when it serves.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

sys.argv.append("--extras")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import modern_server  # noqa: E402

UNSUPPORTED_PROTOCOL_VERSION = -32022


def only_2026(app: Any) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
        if version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await app(scope, receive, send)
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "initialize":
            error = {
                "jsonrpc": "2.0",
                "id": request.get("id"),
                "error": {
                    "code": UNSUPPORTED_PROTOCOL_VERSION,
                    "message": "this server speaks only 2026-07-28; the initialize handshake is not accepted",
                },
            }
            payload = json.dumps(error).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = only_2026(modern_server.mcp.streamable_http_app())
    # Listening before the ready line, so a client that reads it can connect at once.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    server.run(sockets=[sock])
