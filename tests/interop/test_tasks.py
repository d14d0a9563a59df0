"""Task-augmented execution (2025-11-25 experimental `tasks`), beyond items 1-10.

`simulate-research-query` is the server's task-only tool (taskSupport=required): a
`tools/call` carrying `task` returns a CreateTaskResult at once; the work runs in four
1 s stages; `tasks/result` blocks until it is done.  With `ambiguous: true` the server
asks the client for clarification with an `elicitation/create` tied to the task
(`_meta.io.modelcontextprotocol/related-task`), delivered while `tasks/result` is pending.

The Python SDK 2.3.0 has no client API for tasks (tasks/* are deliberately absent from its
method tables, and `tools/call` results are validated as CallToolResult), so the
task-augmented call goes through the session's dispatcher (`send_raw_request`, private but
pinned with the SDK version) and tasks/* through `ClientSession.send_request` with a
generic request model.  The protocol is the same in both modes (auto falls back to 2025-11-25).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import Interop
from mcp.client import stdio as mcp_stdio
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import TypeAdapter

pytestmark = pytest.mark.anyio

RawRequest = types.Request[dict[str, Any] | None, str]
RELATED_TASK = "io.modelcontextprotocol/related-task"


@pytest.fixture(autouse=True)
def fast_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task keeps a 5-minute TTL timer in the server (InMemoryTaskStore), so the server
    does not exit when its stdin closes; the SDK then waits PROCESS_TERMINATION_TIMEOUT (2 s)
    before SIGTERM.  Shorten that wait for this module (autouse: torn down after `mcp`)."""
    monkeypatch.setattr(mcp_stdio, "PROCESS_TERMINATION_TIMEOUT", 0.3)


async def raw(h: Interop, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return await h.c.session.send_request(RawRequest(method=method, params=params), TypeAdapter(dict[str, Any]))


async def create_research_task(h: Interop, topic: str, ambiguous: bool) -> dict[str, Any]:
    result = await h.c.session._dispatcher.send_raw_request(  # noqa: SLF001 - see module docstring
        "tools/call",
        {
            "name": "simulate-research-query",
            "arguments": {"topic": topic, "ambiguous": ambiguous},
            "task": {"ttl": 60000},
        },
        {"timeout": 30},
    )
    task = result["task"]
    assert task["status"] == "working"
    assert task["statusMessage"] == "Gathering sources..."
    assert isinstance(task["taskId"], str) and task["taskId"]
    return task


async def test_task_lifecycle_with_elicitation(mcp: Interop) -> None:
    def clarify(params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"interpretation": "programming"})

    mcp.elicitation_reply = clarify
    plain = await create_research_task(mcp, "interop suites", ambiguous=False)
    ambiguous = await create_research_task(mcp, "python", ambiguous=True)
    assert plain["taskId"] != ambiguous["taskId"]

    status = await raw(mcp, "tasks/get", {"taskId": plain["taskId"]})
    assert status["taskId"] == plain["taskId"] and status["status"] in {"working", "completed"}

    results: dict[str, dict[str, Any]] = {}

    async def fetch(task_id: str) -> None:
        results[task_id] = await raw(mcp, "tasks/result", {"taskId": task_id})

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:  # both run concurrently (~4-5 s)
            tg.start_soon(fetch, plain["taskId"])
            tg.start_soon(fetch, ambiguous["taskId"])

    plain_text = results[plain["taskId"]]["content"][0]["text"]
    assert plain_text.startswith("# Research Report: interop suites\n")
    assert "- Stage 4: Generating report ✓" in plain_text
    assert "Clarification" not in plain_text

    # The server asked for clarification through the client's elicitation callback ...
    (params,) = mcp.elicitation_requests.items
    assert params.message.startswith('The research query "python" could have multiple interpretations.')
    choices = params.requested_schema["properties"]["interpretation"]["oneOf"]
    assert {"const": "programming", "title": "Python programming language"} in choices
    (request,) = mcp.inbound("elicitation/create")
    assert request.params["_meta"][RELATED_TASK] == {"taskId": ambiguous["taskId"]}
    # ... and the answer made it into the report.
    ambiguous_result = results[ambiguous["taskId"]]
    assert ambiguous_result["content"][0]["text"].startswith("# Research Report: python (programming)\n")
    assert ambiguous_result["_meta"][RELATED_TASK] == {"taskId": ambiguous["taskId"]}

    for task in (plain, ambiguous):
        done = await raw(mcp, "tasks/get", {"taskId": task["taskId"]})
        assert done["status"] == "completed"
    listed = await raw(mcp, "tasks/list", {})
    assert {t["taskId"] for t in listed["tasks"]} == {plain["taskId"], ambiguous["taskId"]}


async def test_task_cancel(mcp: Interop) -> None:
    task = await create_research_task(mcp, "to be cancelled", ambiguous=False)
    cancelled = await raw(mcp, "tasks/cancel", {"taskId": task["taskId"]})
    assert cancelled["taskId"] == task["taskId"]
    assert cancelled["status"] == "cancelled"
    assert cancelled["statusMessage"] == "Client cancelled task execution."
    status = await raw(mcp, "tasks/get", {"taskId": task["taskId"]})
    assert status["status"] == "cancelled"


async def test_task_unknown_id(shared: Interop) -> None:
    with pytest.raises(MCPError) as info:
        await raw(shared, "tasks/get", {"taskId": "no-such-task"})
    assert info.value.code == INVALID_PARAMS
    assert info.value.message == "MCP error -32602: Failed to retrieve task: Task not found"
