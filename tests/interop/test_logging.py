"""Item 7: logging/setLevel and notifications/message.

Deterministic log sources on this server:
* resources/subscribe logs "Received Subscribe Resource request for URI: ..." at info
  level and only then answers (resources/subscriptions.js) - so once the answer is in, the
  log message was either sent before it or filtered out by the level;
* toggle-simulated-logging sends one random-level message immediately (then every 5 s).
The server honours the level set with logging/setLevel (TS SDK `sendLoggingMessage`).

On a 2026-07-28 connection logging/setLevel no longer exists (per-request opt-in via
`_meta` instead); the reference server only speaks 2025-11-25, so both modes use setLevel.
"""

from __future__ import annotations

import re

import pytest
from conftest import Interop, text_of

pytestmark = pytest.mark.anyio

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def subscribe_log(uri: str):
    return lambda p: str(p.data).startswith(f"Received Subscribe Resource request for URI: {uri}")


async def test_set_level_filters_messages(mcp: Interop) -> None:
    await mcp.c.set_logging_level("error")
    (set_level,) = mcp.outbound("logging/setLevel")
    assert set_level.params["level"] == "error"
    (reply,) = mcp.responses_to(set_level.id)
    assert reply.data["result"] == {}

    filtered_uri = "demo://resource/dynamic/text/11"
    await mcp.c.subscribe_resource(filtered_uri)
    (sub,) = mcp.outbound("resources/subscribe")
    (sub_reply,) = mcp.responses_to(sub.id)
    # Everything the server wrote before its answer is on the wire by now: no info message.
    before_reply = mcp.wire.items[: mcp.wire.items.index(sub_reply)]
    assert not [
        m for m in before_reply
        if m.method == "notifications/message" and filtered_uri in str(m.params.get("data"))
    ], "an info message was delivered although the level is 'error'"

    await mcp.c.set_logging_level("info")
    delivered_uri = "demo://resource/dynamic/text/12"
    start = mcp.logs.mark()
    await mcp.c.subscribe_resource(delivered_uri)
    log = await mcp.wait_log(subscribe_log(delivered_uri), start=start, what="subscribe log at level info")
    assert log.level == "info"
    assert not mcp.logs.matching(subscribe_log(filtered_uri))


async def test_simulated_logging_messages(mcp: Interop) -> None:
    await mcp.c.set_logging_level("debug")
    start = mcp.logs.mark()
    on = await mcp.c.call_tool("toggle-simulated-logging", {})
    assert text_of(on.content[0]).startswith("Started simulated, random-leveled logging")
    pattern = re.compile(r"^(Debug|Info|Notice|Warning|Error|Critical|Alert|Emergency)[- ]level[- ]message$")
    log = await mcp.wait_log(lambda p: pattern.match(str(p.data)) is not None, start=start, what="simulated log")
    assert log.level in LEVELS
    # The text names the level it was sent at ("Alert level-message" is the server's spelling).
    assert str(log.data).lower().startswith(log.level)
    off = await mcp.c.call_tool("toggle-simulated-logging", {})
    assert text_of(off.content[0]).startswith("Stopped simulated logging")

    # The same message reached the generic message handler as a typed notification.
    notes = [n for n in mcp.notifications.items if getattr(n, "method", None) == "notifications/message"]
    assert any(n.params.data == log.data and n.params.level == log.level for n in notes)


async def test_log_message_with_logger_name(mcp: Interop) -> None:
    # The initial roots sync (conftest waits for it) logs with logger="everything-server".
    log = await mcp.wait_log(lambda p: str(p.data).startswith("Roots updated"), what="roots log")
    assert log.level == "info"
    assert log.logger == "everything-server"
    assert log.data == "Roots updated: 1 root(s) received from client"
