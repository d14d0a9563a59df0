"""Protocol eras through the proxy: 2025-11-25 (initialize handshake) and 2026-07-28 (stateless).

A client on protocol 2026-07-28 (stateless, per-request _meta) works through the proxy against
a 2025-11-25 upstream, and a 2025-11-25 client against a 2026-07-28 upstream (the Python SDK can
serve either).

These tests need the proxy (`MCP_PROXY`); without it the module is skipped.

1. **Bridged**: a `Client(mode="2026-07-28")` in front of the reference server
   (server-everything, TS SDK 1.x, 2025-11-25 only).  The proxy initializes the upstream
   itself, answers `server/discover`, adds `resultType`/`ttlMs`/`cacheScope` to results,
   and turns the upstream's server->client requests (sampling, elicitation, roots) into
   `resultType: "input_required"` rounds that the SDK answers with its callbacks and
   retries (multi-round-trip requests).  A tap between the proxy and the upstream records
   what the proxy sent there.
2. **Python SDK fixture servers** (`servers/`): `dual_server.py` serves both eras
   (`MCPServer.run()`), `legacy_server.py` the same tools with the 2025-11-25 handshake
   only.  The same checks run for every (server, client mode) pair; which mechanism carries
   the client's input (a real server->client request on 2025-11-25, an `input_required`
   round on 2026-07-28) follows from the negotiated version.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip(
        "MCP_PROXY is not set: test_eras.py tests how the proxy bridges protocol eras, so it needs the proxy binary",
        allow_module_level=True,
    )

import anyio  # noqa: E402
import jsonschema  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import (  # noqa: E402
    BASE_TOOLS,
    LOG_DIR,
    READ_TIMEOUT,
    SERVER_JS,
    EventLog,
    WireMsg,
    server_doc,
    tapped_stdio,
    text_of,
    tiny_image_from_source,
)
from mcp import Client  # noqa: E402
from mcp.client.session import ClientRequestContext  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
SERVERS = HERE / "servers"
sys.path.insert(0, str(SERVERS))
import dual_server  # noqa: E402  (constants only; the server runs in its own process)

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ENVELOPE_VERSION = "io.modelcontextprotocol/protocolVersion"
ENVELOPE_CAPS = "io.modelcontextprotocol/clientCapabilities"
ENVELOPE_INFO = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_STAMP = "io.modelcontextprotocol/serverInfo"

EVERYTHING_CMD = ["node", str(SERVER_JS), "stdio"]
DUAL_CMD = [sys.executable, str(SERVERS / "dual_server.py")]
LEGACY_CMD = [sys.executable, str(SERVERS / "legacy_server.py")]
TAP = [sys.executable, str(SERVERS / "stdio_tap.py")]

CLIENT_INFO = types.Implementation(name="mcp-interop-eras", version="1.0.0")
ROOT = types.Root(uri="file:///interop/eras", name="Eras Workspace")
SAMPLED_TEXT = "sampled by the eras test callback"
ELICITED_NAME = "Grace Hopper"

# The reference server's tools registered (besides BASE_TOOLS) after `notifications/initialized` when the client (here: the proxy, from
# the capabilities in the client's envelope) declared roots, elicitation and sampling.
EVERYTHING_CLIENT_TOOLS = {
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
}
WEATHER_CHICAGO = {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}


def proxied(cmd: list[str], *, tap_log: Path | None = None) -> list[str]:
    """`mcpctl proxy` in front of `cmd`, optionally with a stdio tap between proxy and upstream."""
    upstream = [*TAP, str(tap_log), "--", *cmd] if tap_log else cmd
    assert PROXY is not None
    return [PROXY, "proxy", "--model", "passthrough", "--", *upstream]


# --------------------------------------------------------------------------- harness


@dataclass
class Conn:
    """A live `Client` plus what was recorded on it."""

    label: str
    mode: str
    client: Client
    wire: EventLog[WireMsg]
    sampling: EventLog[types.CreateMessageRequestParams] = field(default_factory=lambda: EventLog("sampling"))
    elicitation: EventLog[Any] = field(default_factory=lambda: EventLog("elicitation"))
    roots: EventLog[float] = field(default_factory=lambda: EventLog("roots"))
    elicitation_reply: Callable[[Any], Any] | None = None

    def out(self, method: str, start: int = 0) -> list[WireMsg]:
        return [m for m in self.wire.items[start:] if m.direction == "out" and m.method == method]

    def inbound(self, method: str, start: int = 0) -> list[WireMsg]:
        return [m for m in self.wire.items[start:] if m.direction == "in" and m.method == method]

    def response(self, request: WireMsg) -> dict[str, Any]:
        found = [m for m in self.wire.items if m.direction == "in" and m.is_response and m.id == request.id]
        assert len(found) == 1, f"expected one response to {request.data}, got {found}"
        return found[0].data


@asynccontextmanager
async def connect(cmd: list[str], mode: str, label: str, **client_kwargs: Any) -> AsyncIterator[Conn]:
    """A `Client(mode=...)` on `cmd`, with callbacks for sampling, elicitation and roots."""
    wire: EventLog[WireMsg] = EventLog("wire")
    holder: dict[str, Conn] = {}

    async def on_sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        holder["c"].sampling.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLED_TEXT),
            model="eras-model",
            stop_reason="endTurn",
        )

    async def on_elicitation(ctx: ClientRequestContext, params: Any) -> Any:
        conn = holder["c"]
        conn.elicitation.append(params)
        if conn.elicitation_reply is not None:
            return conn.elicitation_reply(params)
        if getattr(params, "mode", None) == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": ELICITED_NAME})

    async def on_list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        holder["c"].roots.append(anyio.current_time())
        return types.ListRootsResult(roots=[ROOT])

    LOG_DIR.mkdir(exist_ok=True)
    with open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"\n===== {label} (mode={mode}) =====\n")
        errlog.flush()
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
        client = Client(
            tapped_stdio(params, wire, errlog),
            mode=mode,
            read_timeout_seconds=READ_TIMEOUT,
            sampling_callback=on_sampling,
            elicitation_callback=on_elicitation,
            list_roots_callback=on_list_roots,
            client_info=CLIENT_INFO,
            cache=None,  # every request must reach the proxy
            **client_kwargs,
        )
        conn = Conn(label=label, mode=mode, client=client, wire=wire)
        holder["c"] = conn  # before connecting: callbacks may run as soon as the session is up
        async with client:
            yield conn


def read_tap(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The tap log: ("in", msg) = proxy -> upstream, ("out", msg) = upstream -> proxy."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        out.append((entry["dir"], json.loads(entry["line"])))
    return out


# What the proxy itself sends a handshake-only upstream before the client's first request:
# its probe, then the 2025-11-25 handshake.
PROXY_OWN_METHODS = {"server/discover", "initialize", "notifications/initialized"}


def assert_envelope(msg: WireMsg, mode: str) -> None:
    meta = msg.params.get("_meta", {})
    assert meta.get(ENVELOPE_VERSION) == mode, f"request without the {mode} envelope: {msg.data}"
    assert ENVELOPE_CAPS in meta


# =========================================================================== 1. bridged


@pytest.fixture(scope="module")
def tap_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("eras") / "everything-upstream.jsonl"


@pytest.fixture(scope="module")
async def bridged(tap_log: Path) -> AsyncIterator[Conn]:
    """One 2026-07-28 client for the module: proxy (with upstream tap) -> server-everything.

    The server asks for the client's roots on its own, 350 ms after `initialized`
    (server/roots.js), and only until it has them.  The proxy can put that question to the
    client only within a call in flight (it would ride on whichever call that is), so the
    fixture settles it first: `get-roots-list` fetches the roots if the server does not
    have them yet.  After that the server sends no request of its own, and every input round
    a test sees belongs to that test's call.
    """
    async with connect(proxied(EVERYTHING_CMD, tap_log=tap_log), MODERN, "test_eras bridged everything") as conn:
        settled = await conn.client.call_tool("get-roots-list", {})
        assert text_of(settled.content[0]).startswith("Current MCP Roots (1 total)"), settled
        yield conn


async def test_bridged_client_speaks_2026_and_proxy_initializes_upstream(bridged: Conn, tap_log: Path) -> None:
    c = bridged
    assert c.client.protocol_version == MODERN
    tools = await c.client.list_tools()
    assert tools.tools

    # Client side: no handshake at all, every request carries the 2026-07-28 envelope.
    client_out = [m for m in c.wire.items if m.direction == "out"]
    assert not [m for m in client_out if m.method in ("initialize", "notifications/initialized")]
    for msg in client_out:
        if msg.is_request:
            assert_envelope(msg, MODERN)
    raw = c.response(c.out("tools/list")[0])["result"]
    # A 2026-07-28 list result: resultType plus the (required) cache hints.
    assert raw["resultType"] == "complete"
    assert isinstance(raw["ttlMs"], int) and raw["ttlMs"] >= 0
    assert raw["cacheScope"] in ("private", "public")
    assert types.ListToolsResult.model_validate(raw).tools

    # Upstream side: the proxy probed with `server/discover` (the upstream answered -32601),
    # sent exactly one `initialize` (2025-11-25, with the client's capabilities and identity),
    # then `notifications/initialized`; the client's requests went on without the envelope keys.
    tap = read_tap(tap_log)
    to_upstream = [m for d, m in tap if d == "in"]
    inits = [m for m in to_upstream if m.get("method") == "initialize"]
    assert len(inits) == 1, f"the proxy must initialize the upstream once: {to_upstream}"
    init = inits[0]["params"]
    assert init["protocolVersion"] == HANDSHAKE
    assert set(init["capabilities"]) >= {"sampling", "elicitation", "roots"}
    assert init["clientInfo"]["name"] == CLIENT_INFO.name
    methods = [m.get("method") for m in to_upstream]
    first_forwarded = next(i for i, m in enumerate(methods) if m not in PROXY_OWN_METHODS)
    assert methods.index("initialize") < methods.index("notifications/initialized") < first_forwarded, methods
    for forwarded in to_upstream[first_forwarded:]:
        meta = (forwarded.get("params") or {}).get("_meta") or {}
        assert not [k for k in meta if k.startswith("io.modelcontextprotocol/")], forwarded


async def test_bridged_server_discover(bridged: Conn) -> None:
    """Once bridged, `server/discover` is answered by the proxy from the upstream's initialize result."""
    c = bridged
    await c.client.list_tools()  # make sure the bridge is up (the first stateless request sets it up)
    mark = c.wire.mark()
    raw = await c.client.session.send_discover(MODERN)
    result = types.DiscoverResult.model_validate(raw)
    assert MODERN in result.supported_versions
    assert result.result_type == "complete"
    assert result.ttl_ms is not None and result.ttl_ms >= 0
    assert result.cache_scope in ("private", "public")
    assert result.instructions == server_doc("instructions.md")
    caps = result.capabilities
    assert caps.tools is not None and caps.prompts is not None and caps.resources is not None
    assert caps.completions is not None
    (req,) = c.out("server/discover", mark)
    wire_caps = c.response(req)["result"]["capabilities"]
    assert "tasks" not in wire_caps, "2026-07-28 removed the tasks capability"
    stamp = (raw.get("_meta") or {}).get(SERVER_INFO_STAMP)
    assert stamp is not None, f"no serverInfo stamp in the discover result: {raw}"
    assert stamp["name"] == "mcp-servers/everything" and stamp["version"] == "2.0.0"


async def test_bridged_tools_listed(bridged: Conn) -> None:
    tools = {t.name: t for t in (await bridged.client.list_tools()).tools}
    assert set(tools) >= BASE_TOOLS | EVERYTHING_CLIENT_TOOLS
    assert tools["echo"].input_schema["required"] == ["message"]
    assert tools["get-sum"].input_schema["required"] == ["a", "b"]


async def test_bridged_echo_and_sum(bridged: Conn) -> None:
    c = bridged
    mark = c.wire.mark()
    result = await c.client.call_tool("echo", {"message": "héllo 2026 ✓"})
    assert result.is_error is False
    assert [text_of(b) for b in result.content] == ["Echo: héllo 2026 ✓"]
    (call,) = c.out("tools/call", mark)
    assert_envelope(call, MODERN)
    assert c.response(call)["result"]["resultType"] == "complete"

    total = await c.client.call_tool("get-sum", {"a": 2, "b": 3})
    assert [text_of(b) for b in total.content] == ["The sum of 2 and 3 is 5."]


async def test_bridged_structured_content(bridged: Conn) -> None:
    tools = {t.name: t for t in (await bridged.client.list_tools()).tools}
    schema = tools["get-structured-content"].output_schema
    assert schema is not None
    result = await bridged.client.call_tool("get-structured-content", {"location": "Chicago"})
    assert result.is_error is False
    assert result.structured_content == WEATHER_CHICAGO
    jsonschema.validate(result.structured_content, schema)
    assert json.loads(text_of(result.content[0])) == WEATHER_CHICAGO


async def test_bridged_tiny_image(bridged: Conn) -> None:
    result = await bridged.client.call_tool("get-tiny-image", {})
    assert len(result.content) == 3
    image = result.content[1]
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png"
    assert image.data == tiny_image_from_source()


async def test_bridged_prompt_with_arguments(bridged: Conn) -> None:
    prompts = {p.name for p in (await bridged.client.list_prompts()).prompts}
    assert {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"} <= prompts
    result = await bridged.client.get_prompt("args-prompt", {"city": "Springfield", "state": "Illinois"})
    (message,) = result.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "What's weather in Springfield, Illinois?"


async def test_bridged_resources(bridged: Conn) -> None:
    c = bridged
    listed = await c.client.list_resources()
    uri = "demo://resource/static/document/instructions.md"
    assert uri in {r.uri for r in listed.resources}
    mark = c.wire.mark()
    result = await c.client.read_resource(uri)
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.text == server_doc("instructions.md")
    (read,) = c.out("resources/read", mark)
    raw = c.response(read)["result"]
    assert raw["resultType"] == "complete" and "ttlMs" in raw and "cacheScope" in raw

    blob = await c.client.read_resource("demo://resource/dynamic/blob/7")
    (blob_content,) = blob.contents
    assert isinstance(blob_content, types.BlobResourceContents)
    assert blob_content.uri == "demo://resource/dynamic/blob/7"

    templates = await c.client.list_resource_templates()
    assert "demo://resource/dynamic/text/{resourceId}" in {t.uri_template for t in templates.resource_templates}


def input_rounds(c: Conn, start: int, method: str) -> list[dict[str, Any]]:
    """The `input_required` results the client got for `method` requests since `start`."""
    rounds = []
    for msg in c.out(method, start):
        result = c.response(msg).get("result", {})
        if result.get("resultType") == "input_required":
            rounds.append(result)
    return rounds


def asked_methods(rounds: list[dict[str, Any]]) -> list[str]:
    return [req["method"] for r in rounds for req in r.get("inputRequests", {}).values()]


async def test_bridged_sampling_becomes_input_round(bridged: Conn) -> None:
    c = bridged
    mark, asked = c.wire.mark(), c.sampling.mark()
    result = await c.client.call_tool("trigger-sampling-request", {"prompt": "What is 6*7?", "maxTokens": 33})
    assert result.is_error is False, result
    (params,) = c.sampling.items[asked:]
    assert params.max_tokens == 33
    assert isinstance(params.messages[0].content, types.TextContent)
    assert params.messages[0].content.text == "Resource trigger-sampling-request context: What is 6*7?"
    text = text_of(result.content[0])
    assert text.startswith("LLM sampling result: \n")
    echoed = json.loads(text.removeprefix("LLM sampling result: \n"))
    assert echoed["content"] == {"type": "text", "text": SAMPLED_TEXT}
    assert echoed["model"] == "eras-model"

    # On the wire: the first tools/call was answered with an input round asking for
    # sampling/createMessage; the retry (new id) carried requestState and the answer.
    rounds = input_rounds(c, mark, "tools/call")
    assert "sampling/createMessage" in asked_methods(rounds)
    calls = c.out("tools/call", mark)
    assert len(calls) == len(rounds) + 1
    assert len({m.id for m in calls}) == len(calls), "every round is a new request id"
    retry = calls[-1].params
    assert retry["requestState"] == rounds[-1]["requestState"]
    assert set(retry["inputResponses"]) == set(rounds[-1]["inputRequests"])
    assert not c.inbound("sampling/createMessage", mark), "2026-07-28 has no server->client requests"


async def test_bridged_elicitation_becomes_input_round(bridged: Conn) -> None:
    c = bridged
    mark, asked = c.wire.mark(), c.elicitation.mark()
    answer = {"name": ELICITED_NAME, "check": True, "integer": 7}
    c.elicitation_reply = lambda params: types.ElicitResult(action="accept", content=answer)
    try:
        result = await c.client.call_tool("trigger-elicitation-request", {})
    finally:
        c.elicitation_reply = None
    assert result.is_error is False, result
    (params,) = c.elicitation.items[asked:]
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == "Please provide inputs for the following fields:"
    texts = [text_of(b) for b in result.content]
    assert texts[0] == "✅ User provided the requested information!"
    assert f"- Name: {ELICITED_NAME}" in texts[1]
    assert json.loads(texts[2].removeprefix("\nRaw result: ")) == {"action": "accept", "content": answer}
    assert "elicitation/create" in asked_methods(input_rounds(c, mark, "tools/call"))
    assert not c.inbound("elicitation/create", mark)


async def test_bridged_url_elicitation(bridged: Conn) -> None:
    c = bridged
    asked = c.elicitation.mark()
    url = "https://example.com/eras/authorize"
    result = await c.client.call_tool(
        "trigger-url-elicitation", {"url": url, "message": "Open it", "elicitationId": "eras-1"}
    )
    (params,) = c.elicitation.items[asked:]
    assert isinstance(params, types.ElicitRequestURLParams)
    assert params.url == url
    assert text_of(result.content[0]).startswith("✅ User completed the URL elicitation flow.")


async def test_bridged_roots_answered_by_callback(bridged: Conn) -> None:
    c = bridged
    # The fixture's first `get-roots-list` made the server fetch the roots: a `roots/list`
    # input round, answered by the roots callback.  The server keeps them, so this call
    # shows them without asking again.
    assert c.roots.items, "the roots callback was never called"
    assert "roots/list" in asked_methods(input_rounds(c, 0, "tools/call"))
    assert not c.inbound("roots/list"), "2026-07-28 has no server->client requests"
    result = await c.client.call_tool("get-roots-list", {})
    text = text_of(result.content[0])
    assert text.startswith(f"Current MCP Roots (1 total):\n\n1. {ROOT.name}\n   URI: {ROOT.uri}\n"), text


async def test_bridged_progress(bridged: Conn) -> None:
    c = bridged
    steps = 3
    progress: EventLog[tuple[float, float | None]] = EventLog("progress")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    mark = c.wire.mark()
    result = await c.client.call_tool(
        "trigger-long-running-operation", {"duration": 0.3, "steps": steps}, progress_callback=on_progress
    )
    assert text_of(result.content[0]) == f"Long running operation completed. Duration: 0.3 seconds, Steps: {steps}."
    await progress.wait_for(lambda _: True, count=steps, what="progress callbacks")
    assert progress.items == [(float(i), float(steps)) for i in range(1, steps + 1)]
    calls = c.out("tools/call", mark)
    token = calls[-1].params["_meta"]["progressToken"]
    notes = [m for m in c.inbound("notifications/progress", mark) if m.params.get("progressToken") == token]
    assert [m.params["progress"] for m in notes] == list(range(1, steps + 1))


async def test_bridged_errors(bridged: Conn) -> None:
    c = bridged
    # The TS SDK's McpServer reports an unknown tool as an isError result, not a JSON-RPC error.
    unknown = await c.client.call_tool("no-such-tool", {})
    assert unknown.is_error is True
    assert text_of(unknown.content[0]) == "MCP error -32602: Tool no-such-tool not found"

    with pytest.raises(MCPError) as info:
        await c.client.read_resource("demo://resource/no-such-thing")
    assert info.value.code == INVALID_PARAMS

    raw_request = types.Request[dict[str, Any] | None, str](method="interop/no-such-method", params={})
    with pytest.raises(MCPError) as info:
        await c.client.session.send_request(raw_request, TypeAdapter(dict))
    assert info.value.code == METHOD_NOT_FOUND
    # The connection still works after errors.
    assert (await c.client.call_tool("echo", {"message": "still here"})).is_error is False


@pytest.mark.parametrize("log_level", [None, "info"], ids=["no-opt-in", "info"])
async def test_bridged_logs_only_for_requests_that_opt_in(log_level: str | None) -> None:
    """2026-07-28: `notifications/message` only for a request that carries `_meta.logLevel`.

    The reference server logs "Roots updated: ..." inside `get-roots-list` when it fetched the
    client's roots (before it returns the result, so the log precedes the response on the
    wire).  A 2026-07-28 client that did not opt in must not get it ("absent means the server
    MUST NOT send logs"); one that opted in at `info` must.
    """
    logs: EventLog[types.LoggingMessageNotificationParams] = EventLog("logs")

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    label = f"test_eras bridged logging (log_level={log_level})"
    async with connect(proxied(EVERYTHING_CMD), MODERN, label, log_level=log_level, logging_callback=on_log) as c:
        result = await c.client.call_tool("get-roots-list", {})
        if log_level is not None:
            await logs.wait_for(lambda p: str(p.data).startswith("Roots updated: 1 root(s)"), what="roots log")
    assert text_of(result.content[0]).startswith("Current MCP Roots (1 total)")
    messages = [m.data for m in c.inbound("notifications/message")]
    calls = c.out("tools/call")
    if log_level is None:
        assert all("io.modelcontextprotocol/logLevel" not in m.params["_meta"] for m in calls)
        assert messages == [], f"no logLevel opt-in, yet log messages reached the client: {json.dumps(messages)}"
    else:
        assert all(m.params["_meta"]["io.modelcontextprotocol/logLevel"] == log_level for m in calls)
        # One message, or two if the server's own roots sync (350 ms after `initialized`) raced the call.
        assert messages
        assert {m["params"]["data"] for m in messages} == {"Roots updated: 1 root(s) received from client"}


# =========================================================================== 2. Python SDK servers

# (server, client mode, expected protocol version)
PY_CASES = [
    pytest.param(("dual", "legacy", HANDSHAKE), id="dual-legacy"),  # 2025 client, dual-era upstream
    pytest.param(("dual", MODERN, MODERN), id="dual-2026"),  # modern pass-through
    pytest.param(("dual", "auto", MODERN), id="dual-auto"),  # discover passes through, modern
    pytest.param(("legacy", MODERN, MODERN), id="legacy-2026"),  # bridged by the proxy
    pytest.param(("legacy", "auto", HANDSHAKE), id="legacy-auto"),  # discover -32601 -> initialize
]


@dataclass
class PyCase:
    server: str
    mode: str
    version: str
    conn: Conn


@pytest.fixture(scope="module", params=PY_CASES)
async def py(request: pytest.FixtureRequest) -> AsyncIterator[PyCase]:
    server, mode, version = request.param
    cmd = DUAL_CMD if server == "dual" else LEGACY_CMD
    async with connect(proxied(cmd), mode, f"test_eras {server} server") as conn:
        yield PyCase(server, mode, version, conn)


async def test_py_negotiated_version(py: PyCase) -> None:
    c = py.conn
    assert c.client.protocol_version == py.version
    await c.client.list_tools()
    first = next(m for m in c.wire.items if m.direction == "out" and m.is_request)
    requests = [m for m in c.wire.items if m.direction == "out" and m.is_request]
    if py.mode == "legacy":
        assert first.method == "initialize"
    elif py.mode == "auto":
        assert first.method == "server/discover"
        (probe,) = c.out("server/discover")
        reply = c.response(probe)
        if py.version == MODERN:
            assert MODERN in reply["result"]["supportedVersions"]
            assert not c.out("initialize")
        else:
            assert reply["error"]["code"] == METHOD_NOT_FOUND
            assert len(c.out("initialize")) == 1
    else:
        assert not c.out("initialize") and not c.out("server/discover")
    if py.version == MODERN:
        for msg in requests:
            assert_envelope(msg, MODERN)
        info = c.client.server_info
        if info is not None:  # optional on 2026-07-28 (mode="2026-07-28" skips discover)
            assert info.name == dual_server.SERVER_NAME
    else:
        assert c.client.server_info is not None
        assert c.client.server_info.name == dual_server.SERVER_NAME
        assert c.client.server_info.version == dual_server.SERVER_VERSION
        assert c.client.instructions == dual_server.INSTRUCTIONS


async def test_py_tools(py: PyCase) -> None:
    c = py.conn.client
    tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == {
        "echo",
        "add",
        "greet",
        "sample_and_roots",
        "slow",
        "greet_with_progress",
        "gated_greet",
        "open_gate",
        "fail",
    }
    assert tools["add"].input_schema["required"] == ["a", "b"]
    echo = await c.call_tool("echo", {"text": "hi ✓"})
    assert [text_of(b) for b in echo.content] == ["echo: hi ✓"]
    added = await c.call_tool("add", {"a": 40, "b": 2})
    assert added.structured_content == {"result": 42}
    assert [text_of(b) for b in added.content] == ["42"]


async def test_py_tool_error_result(py: PyCase) -> None:
    result = await py.conn.client.call_tool("fail", {"reason": "eras"})
    assert result.is_error is True
    assert "failed on purpose: eras" in text_of(result.content[0])


async def test_py_elicitation(py: PyCase) -> None:
    c = py.conn
    mark, asked = c.wire.mark(), c.elicitation.mark()
    result = await c.client.call_tool("greet", {})
    assert result.is_error is False, result
    assert [text_of(b) for b in result.content] == [f"hello {ELICITED_NAME}"]
    (params,) = c.elicitation.items[asked:]
    assert params.message == "What is your name?"
    if py.version == MODERN:
        # 2026-07-28: an input round (from the server itself, or made by the proxy when it
        # bridges the legacy server's real request), then a retry with the answer.
        rounds = input_rounds(c, mark, "tools/call")
        assert asked_methods(rounds) == ["elicitation/create"]
        assert not c.inbound("elicitation/create", mark)
    else:
        # 2025-11-25: a real server->client request while the call is pending.
        (req,) = c.inbound("elicitation/create", mark)
        assert len(c.out("tools/call", mark)) == 1
        (answer,) = [m for m in c.wire.items if m.direction == "out" and m.is_response and m.id == req.id]
        assert answer.data["result"] == {"action": "accept", "content": {"name": ELICITED_NAME}}


async def test_py_sampling_and_roots(py: PyCase) -> None:
    c = py.conn
    mark, sampled, rooted = c.wire.mark(), c.sampling.mark(), c.roots.mark()
    result = await c.client.call_tool("sample_and_roots", {"topic": "eras"})
    assert result.is_error is False, result
    assert [text_of(b) for b in result.content] == [f"llm said: {SAMPLED_TEXT}; roots: {ROOT.uri}"]
    (params,) = c.sampling.items[sampled:]
    assert params.max_tokens == 64
    assert len(c.roots.items[rooted:]) == 1
    if py.version == MODERN:
        assert sorted(asked_methods(input_rounds(c, mark, "tools/call"))) == ["roots/list", "sampling/createMessage"]
    else:
        assert len(c.inbound("sampling/createMessage", mark)) == 1
        assert len(c.inbound("roots/list", mark)) == 1


async def test_py_progress(py: PyCase) -> None:
    c = py.conn
    progress: EventLog[tuple[float, float | None, str | None]] = EventLog("progress")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    result = await c.client.call_tool("slow", {"steps": 3}, progress_callback=on_progress)
    assert [text_of(b) for b in result.content] == ["done after 3 steps"]
    await progress.wait_for(lambda _: True, count=3, what="progress callbacks")
    assert progress.items == [(float(i), 3.0, f"step {i}") for i in range(1, 4)]


async def test_py_progress_after_input_round(py: PyCase) -> None:
    """Progress sent after the client answered the server's question reaches the progress callback.

    On 2026-07-28 the answer travels in a retry (a new request with its own progressToken);
    when the proxy bridges the legacy server, the upstream call is the original one, so the
    proxy must route its progress to the retry's token.
    """
    c = py.conn
    progress: EventLog[tuple[float, float | None, str | None]] = EventLog("progress")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    mark = c.wire.mark()
    result = await c.client.call_tool("greet_with_progress", {"steps": 2}, progress_callback=on_progress)
    assert [text_of(b) for b in result.content] == [f"hello {ELICITED_NAME} after 2 steps"]
    await progress.wait_for(lambda _: True, count=2, what="progress callbacks")
    assert progress.items == [(1.0, 2.0, "greeting 1"), (2.0, 2.0, "greeting 2")]
    final_call = c.out("tools/call", mark)[-1]
    token = final_call.params["_meta"]["progressToken"]
    notes = c.inbound("notifications/progress", mark)
    assert [n.params["progressToken"] for n in notes] == [token, token]


async def test_py_concurrent_calls_with_input(py: PyCase) -> None:
    """The server asks a question for one call while another call is also in flight.

    `gated_greet` elicits only after `open_gate` has started, and `open_gate` returns only
    after `gated_greet` has finished, so neither can complete unless the question is put to
    the client and the answer goes back to the call that asked it.  (When the proxy bridges
    the legacy server, a 2025-11-25 request does not say which call it belongs to, so the
    proxy may put the question on `open_gate`'s call; what matters is that the answer reaches
    the upstream request and both calls complete.)
    """
    c = py.conn
    asked = c.elicitation.mark()
    results: dict[str, Any] = {}

    async def call(name: str) -> None:
        results[name] = await c.client.call_tool(name, {})

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "gated_greet")
            # Wait until the first call is on the wire before sending the second one.
            await c.wire.wait_for(lambda m: m.direction == "out" and m.method == "tools/call"
                                  and m.params.get("name") == "gated_greet", what="gated_greet call")
            tg.start_soon(call, "open_gate")
    assert [text_of(b) for b in results["gated_greet"].content] == [f"hello {ELICITED_NAME} (gated)"]
    assert [text_of(b) for b in results["open_gate"].content] == ["gate opened"]
    (params,) = c.elicitation.items[asked:]
    assert params.message == "What is your name (gated)?"


async def test_py_resource_and_prompt(py: PyCase) -> None:
    c = py.conn.client
    listed = await c.list_resources()
    assert [r.uri for r in listed.resources] == [dual_server.GREETING_URI]
    read = await c.read_resource(dual_server.GREETING_URI)
    (content,) = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.text == dual_server.GREETING_TEXT

    prompts = {p.name: p for p in (await c.list_prompts()).prompts}
    assert set(prompts) == {"welcome"}
    assert {a.name: a.required for a in prompts["welcome"].arguments or []} == {"name": True, "style": False}
    got = await c.get_prompt("welcome", {"name": "Ada", "style": "formal"})
    (message,) = got.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Write a formal welcome message for Ada."


async def test_py_results_match_the_negotiated_era(py: PyCase) -> None:
    """2026-07-28: every result carries resultType, cacheable ones ttlMs/cacheScope too.
    2025-11-25: none of these later-revision fields."""
    c = py.conn
    mark = c.wire.mark()
    await c.client.list_tools()
    await c.client.read_resource(dual_server.GREETING_URI)
    await c.client.get_prompt("welcome", {"name": "Ada"})
    await c.client.call_tool("echo", {"text": "x"})
    for method in ("tools/list", "resources/read", "prompts/get", "tools/call"):
        (req,) = c.out(method, mark)
        raw = c.response(req)["result"]
        cacheable = method in ("tools/list", "resources/read")
        if py.version == MODERN:
            assert raw["resultType"] == "complete", (method, raw)
            if cacheable:
                assert isinstance(raw["ttlMs"], int) and raw["cacheScope"] in ("private", "public"), (method, raw)
        else:
            assert not {"resultType", "ttlMs", "cacheScope"} & set(raw), (method, raw)


async def test_dual_server_modern_pass_through_is_transparent() -> None:
    """2026-07-28 client, 2026-07-28 upstream: the proxied results equal the direct ones."""
    results: dict[str, list[Any]] = {}
    for label, cmd in (("direct", DUAL_CMD), ("proxied", proxied(DUAL_CMD))):
        async with connect(cmd, MODERN, f"test_eras transparency {label}") as c:
            await c.client.list_tools()
            await c.client.list_resources()
            await c.client.read_resource(dual_server.GREETING_URI)
            await c.client.get_prompt("welcome", {"name": "Ada"})
            await c.client.call_tool("add", {"a": 1, "b": 2})
            await c.client.call_tool("greet", {})
            results[label] = []
            for m in c.wire.items:
                if m.direction == "in" and m.is_response:
                    result = dict(m.data.get("result", {}))
                    # requestState is an opaque, server-sealed token (random per process).
                    result.pop("requestState", None)
                    results[label].append(result)
    assert results["proxied"] == results["direct"]
