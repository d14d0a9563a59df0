"""Items 2 and 3: progress notifications and cancellation of a long-running call.

`trigger-long-running-operation` (tools/trigger-long-running-operation.js) sleeps
`duration/steps` seconds per step and, when the request carries a progressToken, sends
`notifications/progress {progress: i, total: steps}` after each step, then returns.
Its handler ignores the abort signal, but the TS SDK suppresses the response of a request
it received `notifications/cancelled` for - so a late reply can only show up if the
cancellation did not reach the server.
"""

from __future__ import annotations

import anyio
import pytest
from conftest import EventLog, Interop, text_of
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import REQUEST_TIMEOUT

pytestmark = pytest.mark.anyio

LONG_TOOL = "trigger-long-running-operation"


async def test_progress_notifications_relayed_in_order(shared: Interop) -> None:
    h = shared
    steps = 5
    progress: EventLog[tuple[float, float | None, str | None]] = EventLog("progress")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    wire = h.wire.mark()
    result = await h.c.call_tool(LONG_TOOL, {"duration": 1, "steps": steps}, progress_callback=on_progress)
    assert text_of(result.content[0]) == f"Long running operation completed. Duration: 1 seconds, Steps: {steps}."

    # Callbacks run as tasks; wait for all of them, then check order and values.
    await progress.wait_for(lambda _: True, count=steps, what="progress callbacks")
    assert progress.items == [(float(i), float(steps), None) for i in range(1, steps + 1)]

    # On the wire: the request carried a progress token, exactly `steps` notifications came
    # back with that token, in increasing order, all before the response.
    (request,) = h.outbound("tools/call", wire)
    token = request.params["_meta"]["progressToken"]
    notes = [m for m in h.inbound("notifications/progress", wire) if m.params.get("progressToken") == token]
    assert [m.params["progress"] for m in notes] == list(range(1, steps + 1))
    assert all(m.params["total"] == steps for m in notes)
    (response,) = h.responses_to(request.id)
    assert all(h.wire.items.index(n) < h.wire.items.index(response) for n in notes)


async def test_no_progress_without_token(shared: Interop) -> None:
    # Without a progress callback the SDK sends no progressToken and the server sends no progress.
    h = shared
    wire = h.wire.mark()
    result = await h.c.call_tool(LONG_TOOL, {"duration": 0.3, "steps": 3})
    assert text_of(result.content[0]) == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."
    (request,) = h.outbound("tools/call", wire)
    assert "progressToken" not in request.params.get("_meta", {})
    assert h.inbound("notifications/progress", wire) == []


@pytest.mark.parametrize("how", ["cancel-scope", "read-timeout"])
async def test_cancel_long_running_call(mcp: Interop, how: str) -> None:
    """Cancel a long call mid-way, then prove no late reply comes - without sleeping.

    A 2 s / 4 step call is cancelled either after its first progress (t~0.5 s, cancel
    scope) or by the SDK's 1 s read timeout; either way the cancellation has >= 1 s to
    reach the server before the call would complete.  Then a 2 s sentinel call runs: it
    cannot finish before the cancelled call would have replied (the server's timers fire in
    expiry order and its output is one ordered stream), so once the sentinel's result is
    in, a late reply to the cancelled request would already be on the wire.
    """
    duration = 2
    progress: EventLog[float] = EventLog("progress")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    outcome: dict[str, object] = {}
    scope = anyio.CancelScope()

    async def run_call() -> None:
        with scope:
            try:
                outcome["result"] = await mcp.c.call_tool(
                    LONG_TOOL,
                    {"duration": duration, "steps": 4},
                    progress_callback=on_progress,
                    read_timeout_seconds=1.0 if how == "read-timeout" else None,
                )
            except MCPError as exc:
                outcome["error"] = exc
        outcome["ended"] = anyio.current_time()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_call)
        if how == "cancel-scope":
            await progress.wait_for(lambda p: p == 1.0, what="first progress notification")
            cancelled_at = anyio.current_time()
            scope.cancel()
        else:
            cancelled_at = anyio.current_time()  # the SDK's read timeout fires on its own

    assert "result" not in outcome, "the cancelled call must not produce a result"
    if how == "read-timeout":
        error = outcome["error"]
        assert isinstance(error, MCPError) and error.code == REQUEST_TIMEOUT
        assert outcome["ended"] - cancelled_at < 10  # 1 s timeout, generous bound for a loaded CI
    else:
        assert "error" not in outcome
        assert outcome["ended"] - cancelled_at < 2, "cancellation must end the call promptly"

    request_id = mcp.last_request_id("tools/call", lambda m: m.params.get("name") == LONG_TOOL)
    (cancel,) = await mcp.wire.wait_for(
        lambda m: m.direction == "out" and m.method == "notifications/cancelled",
        what="outbound notifications/cancelled",
    )
    assert cancel.params["requestId"] == request_id
    reason = "caller cancelled" if how == "cancel-scope" else "timed out after 1.0s"
    assert cancel.params.get("reason") == reason

    # The session is still usable right away, while the server-side handler still runs.
    echo = await mcp.c.call_tool("echo", {"message": "still alive"})
    assert text_of(echo.content[0]) == "Echo: still alive"

    sentinel = await mcp.c.call_tool(LONG_TOOL, {"duration": duration, "steps": 1})
    assert text_of(sentinel.content[0]) == f"Long running operation completed. Duration: {duration} seconds, Steps: 1."
    assert mcp.responses_to(request_id) == [], "a reply to the cancelled request arrived late"
