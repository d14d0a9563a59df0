"""Connection set-up in both client modes, server identity, capabilities, ping."""

from __future__ import annotations

import pytest
from conftest import Interop, server_doc

pytestmark = pytest.mark.anyio

METHOD_NOT_FOUND = -32601


async def test_negotiated_protocol_and_handshake_on_the_wire(shared: Interop) -> None:
    out_requests = [m for m in shared.wire.items if m.direction == "out" and m.is_request]
    first = out_requests[0]
    init = shared.outbound("initialize")
    assert len(init) == 1, "exactly one initialize must be sent"
    assert init[0].params["protocolVersion"] == "2025-11-25"
    assert init[0].params["clientInfo"] == {"name": "mcp-interop-tests", "version": "1.0.0"}
    # The client advertises the features it has callbacks for; the server gates tools on them.
    caps = init[0].params["capabilities"]
    assert set(caps) >= {"sampling", "elicitation", "roots"}
    assert caps["roots"] == {"listChanged": True}
    assert set(caps["elicitation"]) == {"form", "url"}

    init_responses = shared.responses_to(init[0].id)
    assert len(init_responses) == 1
    assert init_responses[0].data["result"]["protocolVersion"] == "2025-11-25"
    assert shared.outbound("notifications/initialized"), "initialized notification must follow the handshake"

    if shared.mode == "legacy":
        assert first.method == "initialize"
        assert not shared.outbound("server/discover"), "legacy mode must not probe server/discover"
        assert shared.c.session.initialize_result is not None
    else:
        # auto mode: the SDK probes the 2026-07-28 `server/discover` first.  The reference
        # server (TS SDK 1.x) only speaks the 2025 handshake, answers -32601, and the client
        # falls back to `initialize` on the same connection.
        assert first.method == "server/discover"
        probe = shared.outbound("server/discover")
        assert len(probe) == 1
        assert probe[0].params["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        answer = shared.responses_to(probe[0].id)
        assert len(answer) == 1, "the discover probe must get exactly one answer"
        assert answer[0].data["error"]["code"] == METHOD_NOT_FOUND
        assert answer[0].data["error"]["message"] == "Method not found"
        assert first.t <= init[0].t
        assert shared.c.session.discover_result is None
        assert shared.c.session.initialize_result is not None

    assert shared.c.protocol_version == "2025-11-25"


async def test_server_identity_instructions_and_capabilities(shared: Interop) -> None:
    info = shared.c.server_info
    assert info is not None
    assert info.name == "mcp-servers/everything"
    assert info.title == "Everything Reference Server"
    assert info.version == "2.0.0"
    # The instructions are the server's docs/instructions.md, verbatim.
    assert shared.c.instructions == server_doc("instructions.md")

    caps = shared.c.server_capabilities
    assert caps.tools is not None and caps.tools.list_changed is True
    assert caps.prompts is not None and caps.prompts.list_changed is True
    assert caps.resources is not None
    assert caps.resources.subscribe is True and caps.resources.list_changed is True
    assert caps.logging is not None
    assert caps.completions is not None
    assert caps.tasks is not None and caps.tasks.cancel is not None and caps.tasks.list is not None


async def test_ping(shared: Interop) -> None:
    # `ping` exists up to 2025-11-25, i.e. on every connection this server can make.
    result = await shared.c.send_ping()
    assert result is not None
    ping = shared.outbound("ping")
    assert len(ping) == 1
    reply = shared.responses_to(ping[0].id)
    assert len(reply) == 1 and reply[0].data["result"] == {}
