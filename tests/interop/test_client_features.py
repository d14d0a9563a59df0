"""Item 8: server->client requests - sampling, elicitation (form and URL), roots.

Each is triggered by a tool; the server sends the request *while the tool call is in
flight* (related to it), the client callback answers, and the answer shows up in the tool
result.  These are 2025-11-25 features: on a 2026-07-28 connection there are no
server->client requests (they become `InputRequiredResult` rounds), but the reference
server only speaks 2025-11-25, so in `auto` mode the client falls back and they work the
same way.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from conftest import Interop, text_of

pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------- sampling
# These tests share one connection per mode: each sets the reply it needs and only looks
# at what was recorded after its own start mark.


async def test_sampling_request_answered_by_callback(shared: Interop) -> None:
    h = shared

    def reply(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="The answer is 42 (from the interop callback)"),
            model="interop-model-x",
            stop_reason="maxTokens",
        )

    h.sampling_reply = reply
    asked, wire = h.sampling_requests.mark(), h.wire.mark()
    result = await h.c.call_tool("trigger-sampling-request", {"prompt": "What is 6*7?", "maxTokens": 77})
    assert result.is_error is False

    (params,) = h.sampling_requests.items[asked:]
    assert params.max_tokens == 77
    assert params.system_prompt == "You are a helpful test server."
    assert params.temperature == 0.7
    (message,) = params.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Resource trigger-sampling-request context: What is 6*7?"

    text = text_of(result.content[0])
    prefix = "LLM sampling result: \n"
    assert text.startswith(prefix)
    echoed = json.loads(text[len(prefix):])
    assert echoed["model"] == "interop-model-x"
    assert echoed["role"] == "assistant"
    assert echoed["stopReason"] == "maxTokens"
    assert echoed["content"] == {"type": "text", "text": "The answer is 42 (from the interop callback)"}

    # On the wire: the server's request arrived while the tool call was pending, and our
    # response went back with the same id.
    (req,) = h.inbound("sampling/createMessage", wire)
    (answer,) = h.answers_to(req)
    assert answer.data["result"]["model"] == "interop-model-x"
    (call,) = h.outbound("tools/call", wire)
    (call_reply,) = h.responses_to(call.id)
    items = h.wire.items
    assert items.index(call) < items.index(req) < items.index(answer) < items.index(call_reply)


async def test_sampling_error_from_callback_is_relayed(shared: Interop) -> None:
    h = shared
    h.sampling_reply = lambda params: types.ErrorData(code=-1, message="User rejected sampling request")
    wire = h.wire.mark()
    result = await h.c.call_tool("trigger-sampling-request", {"prompt": "nope"})
    # The server's sendRequest rejects with the client's error; McpServer turns that into an error result.
    assert result.is_error is True
    assert text_of(result.content[0]) == "MCP error -1: User rejected sampling request"
    (req,) = h.inbound("sampling/createMessage", wire)
    (answer,) = h.answers_to(req)
    assert answer.data["error"] == {"code": -1, "message": "User rejected sampling request"}


# --------------------------------------------------------------------------- elicitation


async def test_form_elicitation_accept(shared: Interop) -> None:
    h = shared
    answer: dict[str, Any] = {
        "name": "Ada Lovelace",
        "check": True,
        "email": "ada@example.org",
        "integer": 7,
        "number": 2.5,
        "birthdate": "1815-12-10",
    }
    h.elicitation_reply = lambda params: types.ElicitResult(action="accept", content=answer)
    asked, wire = h.elicitation_requests.mark(), h.wire.mark()
    result = await h.c.call_tool("trigger-elicitation-request", {})
    assert result.is_error is False

    (params,) = h.elicitation_requests.items[asked:]
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == "Please provide inputs for the following fields:"
    schema = params.requested_schema
    assert schema["required"] == ["name"]
    assert schema["properties"]["email"]["format"] == "email"
    assert schema["properties"]["integer"] == {
        "title": "Integer",
        "type": "integer",
        "description": "Your favorite integer (do not give us your phone number, pin, or other sensitive info)",
        "minimum": 1,
        "maximum": 100,
        "default": 42,
    }

    texts = [text_of(b) for b in result.content]
    assert texts[0] == "✅ User provided the requested information!"
    assert texts[1] == (
        "User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Email: ada@example.org\n"
        "- Birthdate: 1815-12-10\n- Favorite Integer: 7\n- Favorite Number: 2.5"
    )
    raw = json.loads(texts[2].removeprefix("\nRaw result: "))
    assert raw == {"action": "accept", "content": answer}
    (req,) = h.inbound("elicitation/create", wire)
    (wire_answer,) = h.answers_to(req)
    assert wire_answer.data["result"] == {"action": "accept", "content": answer}


@pytest.mark.parametrize(
    ("action", "text"),
    [
        ("decline", "❌ User declined to provide the requested information."),
        ("cancel", "⚠️ User cancelled the elicitation dialog."),
    ],
)
async def test_form_elicitation_decline_or_cancel(shared: Interop, action: str, text: str) -> None:
    shared.elicitation_reply = lambda params: types.ElicitResult(action=action)
    result = await shared.c.call_tool("trigger-elicitation-request", {})
    texts = [text_of(b) for b in result.content]
    assert texts[0] == text
    assert json.loads(texts[1].removeprefix("\nRaw result: ")) == {"action": action}


async def test_url_elicitation(shared: Interop) -> None:
    h = shared
    h.elicitation_reply = lambda params: types.ElicitResult(action="accept")
    asked = h.elicitation_requests.mark()
    url = "https://example.com/interop/authorize?step=1"
    result = await h.c.call_tool(
        "trigger-url-elicitation",
        {"url": url, "message": "Open it, please", "elicitationId": "interop-elicit-1"},
    )
    (params,) = h.elicitation_requests.items[asked:]
    assert isinstance(params, types.ElicitRequestURLParams)
    assert params.mode == "url"
    assert params.url == url
    assert params.message == "Open it, please"
    assert params.elicitation_id == "interop-elicit-1"
    texts = [text_of(b) for b in result.content]
    assert texts[0] == f"✅ User completed the URL elicitation flow.\nElicitation ID: interop-elicit-1\nURL: {url}"


# --------------------------------------------------------------------------- roots


async def test_roots_listed_by_server(mcp: Interop) -> None:
    # conftest waited for the server's initial roots/list (sent 350 ms after initialized).
    assert len(mcp.roots_requests.items) >= 1
    assert mcp.inbound("roots/list"), "the server's roots/list request must reach the client"
    result = await mcp.c.call_tool("get-roots-list", {})
    text = text_of(result.content[0])
    assert text.startswith("Current MCP Roots (1 total):\n\n1. Interop Workspace\n   URI: file:///interop/workspace\n")


async def test_roots_list_changed_notification(mcp: Interop) -> None:
    """Client -> server notifications/roots/list_changed makes the server re-fetch roots."""
    await mcp.wait_log(lambda p: str(p.data) == "Roots updated: 1 root(s) received from client")
    asked = mcp.roots_requests.mark()
    logs = mcp.logs.mark()
    mcp.roots = [
        types.Root(uri="file:///interop/a", name="Root A"),
        types.Root(uri="file:///interop/b", name="Root B"),
    ]
    await mcp.c.send_roots_list_changed()
    assert mcp.outbound("notifications/roots/list_changed")
    await mcp.roots_requests.wait_for(lambda _: True, start=asked, what="roots/list after list_changed")
    await mcp.wait_log(lambda p: str(p.data) == "Roots updated: 2 root(s) received from client", start=logs)

    result = await mcp.c.call_tool("get-roots-list", {})
    text = text_of(result.content[0])
    assert text.startswith(
        "Current MCP Roots (2 total):\n\n1. Root A\n   URI: file:///interop/a\n\n2. Root B\n   URI: file:///interop/b\n"
    )
