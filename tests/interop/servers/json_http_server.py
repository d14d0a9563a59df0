"""Fixture server for test_http_upstream.py: an `MCPServer` over streamable HTTP that answers
every request with one `application/json` body (`json_response=True`), so the HTTP response's
headers arrive only with the result.

Tools: `wait_for_release` returns once `release` was called (it holds its response open until
then); `waiting_calls` says how many have started; `release` sets that event. A proxy that sends one request of a session only after the
previous one's headers arrived never gets `release` through while `wait_for_release` waits.

Run: `python json_http_server.py PORT`; prints `listening on URL` on stderr when it serves.
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("json-http-server")
released = anyio.Event()
waiting = 0


@mcp.tool()
async def wait_for_release() -> str:
    """Waits until `release` is called."""
    global waiting
    waiting += 1
    await released.wait()
    return "released"


@mcp.tool()
def waiting_calls() -> str:
    """How many `wait_for_release` calls have started."""
    return str(waiting)


@mcp.tool()
def release() -> str:
    """Lets `wait_for_release` return."""
    released.set()
    return "ok"


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = mcp.streamable_http_app(json_response=True)
    # Listening before the ready line, so a client that reads it can connect at once.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"listening on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    server.run(sockets=[sock])
