"""Item 9: list_changed notifications (server -> client).

What this server can trigger:
* notifications/tools/list_changed - it registers the capability-gated tools right after
  `initialized` (server/index.js oninitialized -> registerConditionalTools), one
  notification per tool registered;
* notifications/resources/list_changed - `gzip-file-as-resource` registers a new
  session resource (resources/session.js), and re-registering the same name removes the
  old one first.
It has no way to add or remove prompts, so notifications/prompts/list_changed cannot be
triggered (the capability is advertised, nothing ever sends it).
The client -> server direction (notifications/roots/list_changed) is covered in
test_client_features.py.
"""

from __future__ import annotations

import base64

import mcp_types as types
import pytest
from conftest import Interop

pytestmark = pytest.mark.anyio

CONDITIONAL_TOOLS = 5  # get-roots-list, trigger-elicitation-request, trigger-url-elicitation,
# trigger-sampling-request, simulate-research-query


async def test_tools_list_changed_after_initialized(shared: Interop) -> None:
    # Recorded since the connection opened (this connection is shared by the module).
    await shared.notifications.wait_for(
        lambda n: isinstance(n, types.ToolListChangedNotification),
        count=CONDITIONAL_TOOLS,
        what="notifications/tools/list_changed",
    )
    wire = shared.inbound("notifications/tools/list_changed")
    assert len(wire) == CONDITIONAL_TOOLS
    (initialized,) = shared.outbound("notifications/initialized")
    assert all(initialized.t <= m.t for m in wire)
    names = {t.name for t in (await shared.c.list_tools()).tools}
    assert {"get-roots-list", "trigger-sampling-request", "simulate-research-query"} <= names


async def test_resources_list_changed_on_new_session_resource(shared: Interop) -> None:
    name = "list-changed.txt.gz"
    uri = f"demo://resource/session/{name}"
    before = {r.uri for r in (await shared.c.list_resources()).resources}
    assert uri not in before

    start = shared.notifications.mark()
    data = "data:text/plain;base64," + base64.b64encode(b"list changed").decode()
    result = await shared.c.call_tool("gzip-file-as-resource", {"name": name, "data": data})
    assert result.is_error is False
    await shared.notifications.wait_for(
        lambda n: isinstance(n, types.ResourceListChangedNotification),
        start=start,
        what="notifications/resources/list_changed",
    )
    after = {r.uri: r for r in (await shared.c.list_resources()).resources}
    assert set(after) == before | {uri}
    assert after[uri].mime_type == "application/gzip"

    # Replacing the resource (same name) announces the change again.
    start = shared.notifications.mark()
    await shared.c.call_tool("gzip-file-as-resource", {"name": name, "data": data})
    await shared.notifications.wait_for(
        lambda n: isinstance(n, types.ResourceListChangedNotification),
        start=start,
        what="second notifications/resources/list_changed",
    )
    assert {r.uri for r in (await shared.c.list_resources()).resources} == before | {uri}
