"""The reverse era bridge: 2025-11-25 clients in front of a 2026-07-28-only upstream.

The upstream is `servers/modern_server.py`: the dual-era fixture's definitions served by the
official Python SDK's 2026-07-28 loop only (it refuses `initialize` with -32022).  The
official Python client connects through `mcpctl proxy` (stdio) and `mcpctl serve` (HTTP):

1. **test_eras.py's Python-SDK checks, against the 2026-only server**: the same test
   functions (imported below) run with this module's `py` fixture, for a legacy client
   (bridged by the proxy), a 2026-07-28 client (passed through) and an auto client.
2. **What only the bridge does**, seen on a tap between proxy and upstream: the era probe,
   the per-request envelope, `ping` and `logging/setLevel` served by the proxy, resource
   subscriptions and list changes through one `subscriptions/listen` stream, cancellation,
   errors relayed as they are, task-augmented calls refused.
3. **A project of both eras** (the 2026-only server and the handshake-only one), through
   `mcpctl proxy PROJECT` and `mcpctl serve PROJECT`, in both client eras, and the eras that
   `describe project` shows afterwards.

These tests need the proxy (`MCP_PROXY`); without it the module is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip(
        "MCP_PROXY is not set: test_reverse_bridge.py tests the proxy's reverse era bridge, so it needs the proxy binary",
        allow_module_level=True,
    )

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import LOG_DIR, READ_TIMEOUT, EventLog, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from test_eras import (  # noqa: E402
    ELICITED_NAME,
    HANDSHAKE,
    LEGACY_CMD,
    MODERN,
    SERVERS,
    Conn,
    PyCase,
    connect,
    proxied,
    read_tap,
)

# test_eras.py's checks of the Python SDK fixture servers, run here against the 2026-only one.
from test_eras import (  # noqa: E402, F401
    test_py_concurrent_calls_with_input,
    test_py_elicitation,
    test_py_negotiated_version,
    test_py_progress,
    test_py_progress_after_input_round,
    test_py_resource_and_prompt,
    test_py_results_match_the_negotiated_era,
    test_py_sampling_and_roots,
    test_py_tool_error_result,
    test_py_tools,
)

pytestmark = pytest.mark.anyio

MODERN_CMD = [sys.executable, str(SERVERS / "modern_server.py")]
EXTRAS_CMD = [*MODERN_CMD, "--extras"]
NOTES_URI = "modern://notes"
ENVELOPE_VERSION = "io.modelcontextprotocol/protocolVersion"
ENVELOPE_INFO = "io.modelcontextprotocol/clientInfo"
ENVELOPE_LEVEL = "io.modelcontextprotocol/logLevel"

# =========================================================================== 1. test_eras.py's checks

MODERN_CASES = [
    pytest.param(("modern", "legacy", HANDSHAKE), id="modern-legacy"),  # reverse-bridged by the proxy
    pytest.param(("modern", MODERN, MODERN), id="modern-2026"),  # passed through
    pytest.param(("modern", "auto", MODERN), id="modern-auto"),  # discover passes through
]


@pytest.fixture(scope="module", params=MODERN_CASES)
async def py(request: pytest.FixtureRequest) -> AsyncIterator[PyCase]:
    server, mode, version = request.param
    async with connect(proxied(MODERN_CMD), mode, f"test_reverse_bridge {server} server") as conn:
        yield PyCase(server, mode, version, conn)


# =========================================================================== 2. the bridge itself


@pytest.fixture(scope="module")
def extras_tap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reverse") / "modern-upstream.jsonl"


@pytest.fixture(scope="module")
async def legacy(extras_tap: Path) -> AsyncIterator[Conn]:
    """One 2025-11-25 client for the module: proxy (with upstream tap) -> 2026-only server."""
    logs: EventLog[types.LoggingMessageNotificationParams] = EventLog("logs")

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with connect(proxied(EXTRAS_CMD, tap_log=extras_tap), "legacy", "test_reverse_bridge legacy",
                       logging_callback=on_log) as conn:
        conn.logs = logs  # type: ignore[attr-defined]
        yield conn


def to_upstream(tap: Path) -> list[dict[str, Any]]:
    return [m for d, m in read_tap(tap) if d == "in"]


def from_upstream(tap: Path) -> list[dict[str, Any]]:
    return [m for d, m in read_tap(tap) if d == "out"]


async def test_the_proxy_probes_and_answers_initialize_from_discovery(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    assert c.client.protocol_version == HANDSHAKE
    assert c.client.server_info is not None and c.client.server_info.name == "interop-dual-server"
    assert c.client.instructions == "Fixture server of the MCP interop suite (both protocol eras)."
    caps = c.client.server_capabilities
    assert caps.tools is not None and caps.resources is not None and caps.prompts is not None
    assert caps.logging is not None, "the bridge serves logging/setLevel, so it offers logging"
    await c.client.list_tools()

    sent = to_upstream(extras_tap)
    methods = [m.get("method") for m in sent]
    # The client's initialize went up as it was, was refused (-32022), then the proxy probed.
    assert methods[:2] == ["initialize", "server/discover"], methods
    refusal = next(m for m in from_upstream(extras_tap) if m.get("id") == sent[0]["id"])
    assert refusal["error"]["code"] == -32022
    probe = sent[1]["params"]["_meta"]
    assert probe[ENVELOPE_VERSION] == MODERN and probe[ENVELOPE_INFO]["name"] == "mcp-interop-eras"
    # No handshake notification reaches a 2026-07-28 server; every request carries the envelope.
    assert "notifications/initialized" not in methods
    for msg in sent[1:]:
        if "method" in msg and "id" in msg:
            assert msg["params"]["_meta"][ENVELOPE_VERSION] == MODERN, msg
    # One listen stream for the list changes the server announces.
    listens = [m for m in sent if m.get("method") == "subscriptions/listen"]
    assert len(listens) == 1
    assert listens[0]["params"]["notifications"]["toolsListChanged"] is True


async def test_results_lose_what_a_2025_client_does_not_expect(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    mark = c.wire.mark()
    await c.client.list_tools()
    await c.client.read_resource(NOTES_URI)
    for method in ("tools/list", "resources/read"):
        (req,) = c.out(method, mark)
        raw = c.response(req)["result"]
        assert not {"resultType", "ttlMs", "cacheScope"} & set(raw), raw
        assert not [k for k in raw.get("_meta", {}) if k.startswith("io.modelcontextprotocol/")], raw
    # ...which the server did send.
    answers = [m for m in from_upstream(extras_tap) if "result" in m and "tools" in m["result"]]
    assert answers and answers[-1]["result"]["resultType"] == "complete"


async def test_ping_is_served_by_the_proxy(legacy: Conn, extras_tap: Path) -> None:
    await legacy.client.send_ping()
    assert "ping" not in [m.get("method") for m in to_upstream(extras_tap)]


async def test_log_levels_travel_in_the_envelope(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    logs: EventLog[Any] = c.logs  # type: ignore[attr-defined]
    await c.client.set_logging_level("warning")
    start = logs.mark()
    assert text_of((await c.client.call_tool("log_each", {})).content[0]) == "logged"
    await logs.wait_for(lambda p: p.data == "log at warning", what="the warning")
    await c.client.set_logging_level("debug")
    assert text_of((await c.client.call_tool("log_each", {})).content[0]) == "logged"
    await logs.wait_for(lambda p: p.data == "log at warning", count=2, what="the second warning")
    assert [p.data for p in logs.items[start:]] == [
        "log at warning", "log at debug", "log at info", "log at warning",
    ]
    sent = to_upstream(extras_tap)
    assert "logging/setLevel" not in [m.get("method") for m in sent]
    calls = [m for m in sent if m.get("method") == "tools/call" and m["params"]["name"] == "log_each"]
    assert [m["params"]["_meta"][ENVELOPE_LEVEL] for m in calls] == ["warning", "debug"]


async def test_resource_subscriptions_go_through_one_listen_stream(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    await c.client.subscribe_resource(NOTES_URI)
    mark = c.wire.mark()
    await c.client.call_tool("add_note", {"text": "second"})
    (update,) = await c.wire.wait_for(
        lambda m: m.direction == "in" and m.method == "notifications/resources/updated", start=mark,
        what="notifications/resources/updated",
    )
    assert update.params["uri"] == NOTES_URI
    read = await c.client.read_resource(NOTES_URI)
    assert read.contents[0].text.endswith("second")  # type: ignore[union-attr]
    sent = to_upstream(extras_tap)
    assert "resources/subscribe" not in [m.get("method") for m in sent]
    listens = [m for m in sent if m.get("method") == "subscriptions/listen"]
    assert listens[-1]["params"]["notifications"]["resourceSubscriptions"] == [NOTES_URI]
    # The stream before was closed when the new one opened.
    cancels = [m for m in sent if m.get("method") == "notifications/cancelled"]
    assert listens[-2]["id"] in [m["params"]["requestId"] for m in cancels]

    await c.client.unsubscribe_resource(NOTES_URI)
    mark = c.wire.mark()
    await c.client.call_tool("add_note", {"text": "third"})
    await c.client.send_ping()
    assert not c.inbound("notifications/resources/updated", mark)


async def test_list_changed_reaches_the_old_client(legacy: Conn) -> None:
    c = legacy
    mark = c.wire.mark()
    assert text_of((await c.client.call_tool("add_tool", {"name": "late_tool"})).content[0]) == "added late_tool"
    await c.wire.wait_for(
        lambda m: m.direction == "in" and m.method == "notifications/tools/list_changed", start=mark,
        what="notifications/tools/list_changed",
    )
    assert "late_tool" in {t.name for t in (await c.client.list_tools()).tools}
    assert text_of((await c.client.call_tool("late_tool", {})).content[0]) == "late_tool ran"


async def test_cancellation_reaches_the_upstream(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    scope = anyio.CancelScope()
    mark = c.wire.mark()

    progress: EventLog[float] = EventLog("progress")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def run_call() -> None:
        with scope:
            await c.client.call_tool("wait_forever", {}, progress_callback=on_progress)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_call)
        # Its progress says the call runs at the upstream.
        await progress.wait_for(lambda _: True, what="the wait_forever progress")
        scope.cancel()
    await c.wire.wait_for(lambda m: m.direction == "out" and m.method == "notifications/cancelled", start=mark,
                          what="the client's cancellation")
    # The session goes on, and the upstream got the cancellation for its own request.
    assert text_of((await c.client.call_tool("echo", {"text": "after"})).content[0]) == "echo: after"
    sent = to_upstream(extras_tap)
    (call,) = [m for m in sent if m.get("method") == "tools/call" and m["params"]["name"] == "wait_forever"]
    cancelled = [m["params"]["requestId"] for m in sent if m.get("method") == "notifications/cancelled"]
    assert call["id"] in cancelled


async def test_errors_are_relayed_as_they_are(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    with pytest.raises(MCPError) as err:
        await c.client.read_resource("modern://nothing-here")
    sent = to_upstream(extras_tap)
    (read,) = [m for m in sent if m.get("method") == "resources/read" and m["params"]["uri"] == "modern://nothing-here"]
    (answer,) = [m for m in from_upstream(extras_tap) if m.get("id") == read["id"]]
    assert err.value.error.code == answer["error"]["code"]
    assert err.value.error.message == answer["error"]["message"]


async def test_a_task_augmented_call_is_refused_clearly(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    raw = c.client.session
    with pytest.raises(MCPError) as err:
        await raw.send_request(
            types.CallToolRequest(params=types.CallToolRequestParams(name="echo", arguments={"text": "t"}, task=types.TaskMetadata(ttl=60000))),
            types.CallToolResult,
        )
    assert "speaks only 2026-07-28" in err.value.error.message
    assert "call it without `task`" in err.value.error.message


async def test_elicitation_is_a_real_request_for_the_old_client(legacy: Conn, extras_tap: Path) -> None:
    c = legacy
    mark = c.wire.mark()
    result = await c.client.call_tool("greet", {})
    assert [text_of(b) for b in result.content] == [f"hello {ELICITED_NAME}"]
    (req,) = c.inbound("elicitation/create", mark)
    assert req.params["message"] == "What is your name?"
    # Upstream: an input round, then the retry with the answer and the server's requestState.
    sent = to_upstream(extras_tap)
    greets = [m for m in sent if m.get("method") == "tools/call" and m["params"]["name"] == "greet"]
    assert len(greets) == 2
    retry = greets[1]["params"]
    (answer,) = retry["inputResponses"].values()
    assert answer == {"action": "accept", "content": {"name": ELICITED_NAME}}
    assert isinstance(retry.get("requestState"), str)


# =========================================================================== 3. a project of both eras


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with project `mixed`: `modern` (2026-only) and `legacy` (handshake-only)."""
    root = tmp_path_factory.mktemp("reverse-project")
    spec = root / "mixed.yaml"
    docs = [
        {"kind": "Server", "metadata": {"name": "modern"}, "spec": {"command": EXTRAS_CMD[0], "args": EXTRAS_CMD[1:]}},
        {"kind": "Server", "metadata": {"name": "legacy"}, "spec": {"command": LEGACY_CMD[0], "args": LEGACY_CMD[1:]}},
        {"kind": "Project", "metadata": {"name": "mixed"},
         "spec": {"servers": ["modern", "legacy"], "proxyModel": "passthrough"}},
    ]
    spec.write_text("\n---\n".join(json.dumps(d) for d in docs), encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(root / "home")}
    assert PROXY is not None
    done = subprocess.run([PROXY, "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return root / "home"


async def check_mixed(client: Client, version: str) -> None:
    assert client.protocol_version == version
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"modern__echo", "legacy__echo", "modern__add_note", "legacy__greet"} <= names
    for server in ("modern", "legacy"):
        echo = await client.call_tool(f"{server}__echo", {"text": server})
        assert [text_of(b) for b in echo.content] == [f"echo: {server}"]
        greet = await client.call_tool(f"{server}__greet", {})
        assert [text_of(b) for b in greet.content] == [f"hello {ELICITED_NAME}"], (server, greet)
        failed = await client.call_tool(f"{server}__fail", {"reason": server})
        assert failed.is_error is True and f"failed on purpose: {server}" in text_of(failed.content[0])


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_project_of_both_eras_over_stdio(home: Path, mode: str) -> None:
    assert PROXY is not None
    os.environ["MCPCTL_HOME"] = str(home)
    try:
        async with connect([PROXY, "proxy", "mixed"], mode, f"test_reverse_bridge mixed {mode}") as conn:
            await check_mixed(conn.client, HANDSHAKE if mode == "legacy" else MODERN)
    finally:
        del os.environ["MCPCTL_HOME"]


async def test_describe_project_shows_each_servers_era(home: Path) -> None:
    assert PROXY is not None
    os.environ["MCPCTL_HOME"] = str(home)
    try:
        async with connect([PROXY, "proxy", "mixed"], "legacy", "test_reverse_bridge describe") as conn:
            await conn.client.list_tools()
    finally:
        del os.environ["MCPCTL_HOME"]
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    done = subprocess.run([PROXY, "describe", "project", "mixed", "-o", "json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    eras = {e["name"]: e for e in json.loads(done.stdout)["status"]["serverEras"]}
    assert eras["modern"]["era"] == "stateless" and eras["modern"]["bridged"] is True
    assert eras["modern"]["versions"] == [MODERN]
    assert eras["legacy"]["era"] == "handshake" and eras["legacy"]["versions"] == [HANDSHAKE]
    table = subprocess.run([PROXY, "describe", "project", "mixed"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert "modern  stateless (2026-07-28), bridged for 2025-11-25 clients" in table.stdout, table.stdout
    assert "legacy  handshake (2025-11-25)" in table.stdout, table.stdout


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_project_of_both_eras_over_http(home: Path, mode: str) -> None:
    assert PROXY is not None
    LOG_DIR.mkdir(exist_ok=True)
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    with open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"\n===== test_reverse_bridge serve mixed ({mode}) =====\n")
        errlog.flush()
        with ServedProcess([PROXY, "serve", "mixed", "--listen", "127.0.0.1:0"], env, errlog) as served:
            assert served.url is not None

            async def on_elicitation(ctx: Any, params: Any) -> types.ElicitResult:
                return types.ElicitResult(action="accept", content={"name": ELICITED_NAME})

            client = Client(streamable_http_client(served.url), mode=mode, read_timeout_seconds=READ_TIMEOUT,
                            elicitation_callback=on_elicitation, cache=None)
            async with client:
                await check_mixed(client, HANDSHAKE if mode == "legacy" else MODERN)


def described_eras(home: Path, project: str) -> dict[str, Any]:
    assert PROXY is not None
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    done = subprocess.run([PROXY, "describe", "project", project, "-o", "json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return {e["name"]: e for e in json.loads(done.stdout)["status"]["serverEras"] or []}


async def test_a_server_that_changes_era_across_a_restart_is_probed_again(tmp_path: Path) -> None:
    """First start 2026-only, bridged; after a crash the restarted server speaks only the handshake."""
    assert PROXY is not None
    flip = [sys.executable, str(SERVERS / "era_flip_server.py"), str(tmp_path / "started")]
    spec = tmp_path / "flip.yaml"
    docs = [
        {"kind": "Server", "metadata": {"name": "flip"}, "spec": {"command": flip[0], "args": flip[1:]}},
        {"kind": "Project", "metadata": {"name": "flipping"}, "spec": {"servers": ["flip"], "proxyModel": "passthrough"}},
    ]
    spec.write_text("\n---\n".join(json.dumps(d) for d in docs), encoding="utf-8")
    home = tmp_path / "home"
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    done = subprocess.run([PROXY, "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    os.environ["MCPCTL_HOME"] = str(home)
    try:
        async with connect([PROXY, "proxy", "flipping"], "legacy", "test_reverse_bridge flip") as conn:
            c = conn.client
            assert text_of((await c.call_tool("echo", {"text": "one"})).content[0]) == "echo: one"
            first = described_eras(home, "flipping")["flip"]
            assert first["era"] == "stateless" and first["bridged"] is True
            with pytest.raises(MCPError):
                await c.call_tool("crash", {})
            # The next request restarts the server; its era is found out again.
            assert text_of((await c.call_tool("echo", {"text": "two"})).content[0]) == "echo: two"
            greet = await c.call_tool("greet", {})
            assert [text_of(b) for b in greet.content] == [f"hello {ELICITED_NAME}"]
            second = described_eras(home, "flipping")["flip"]
            assert second["era"] == "handshake" and second["bridged"] is False
            assert second["seenAt"] >= first["seenAt"]
    finally:
        del os.environ["MCPCTL_HOME"]


# =========================================================================== 4. an HTTP upstream


@pytest.fixture(scope="module")
def modern_http() -> Any:
    """`modern_http_server.py`: the 2026-only server with extras, over streamable HTTP."""
    from conftest import free_port

    LOG_DIR.mkdir(exist_ok=True)
    errlog = open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8")  # noqa: SIM115
    served = ServedProcess([sys.executable, str(SERVERS / "modern_http_server.py"), str(free_port())],
                           dict(os.environ), errlog)
    try:
        yield served
    finally:
        served.stop()
        errlog.close()


async def test_a_legacy_client_in_front_of_a_2026_only_http_upstream(modern_http: Any) -> None:
    assert PROXY is not None and modern_http.url is not None
    cmd = [PROXY, "proxy", "--model", "passthrough", "--url", modern_http.url]
    async with connect(cmd, "legacy", "test_reverse_bridge http legacy") as conn:
        c = conn.client
        assert c.protocol_version == HANDSHAKE
        assert c.server_info is not None and c.server_info.name == "interop-dual-server"
        assert text_of((await c.call_tool("echo", {"text": "http"})).content[0]) == "echo: http"
        greet = await c.call_tool("greet", {})
        assert [text_of(b) for b in greet.content] == [f"hello {ELICITED_NAME}"]
        mark = conn.wire.mark()
        both = await c.call_tool("sample_and_roots", {"topic": "http"})
        assert both.is_error is False, both
        assert len(conn.inbound("sampling/createMessage", mark)) == 1
        assert len(conn.inbound("roots/list", mark)) == 1
        await c.send_ping()
        raw = conn.response(conn.out("tools/call", mark)[0])["result"]
        assert "resultType" not in raw


async def test_a_2026_client_in_front_of_a_2026_only_http_upstream(modern_http: Any) -> None:
    """Passed through: the proxy, as the HTTP client, sends the 2026-07-28 routing headers."""
    assert PROXY is not None and modern_http.url is not None
    cmd = [PROXY, "proxy", "--model", "passthrough", "--url", modern_http.url]
    async with connect(cmd, MODERN, "test_reverse_bridge http 2026") as conn:
        c = conn.client
        assert c.protocol_version == MODERN
        assert text_of((await c.call_tool("echo", {"text": "é http"})).content[0]) == "echo: é http"
        greet = await c.call_tool("greet", {})
        assert [text_of(b) for b in greet.content] == [f"hello {ELICITED_NAME}"]
        read = await c.read_resource(NOTES_URI)
        assert read.contents[0].text.startswith("first note")  # type: ignore[union-attr]


async def cancelled_waits(c: Client) -> int:
    return int(text_of((await c.call_tool("cancelled_waits", {})).content[0]))


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_a_cancelled_call_reaches_a_2026_only_http_upstream(modern_http: Any, mode: str) -> None:
    """A 2026-07-28 HTTP server drops `notifications/cancelled`: the proxy closes the call's stream."""
    assert PROXY is not None and modern_http.url is not None
    cmd = [PROXY, "proxy", "--model", "passthrough", "--url", modern_http.url]
    async with connect(cmd, mode, f"test_reverse_bridge http cancel {mode}") as conn:
        c = conn.client
        before = await cancelled_waits(c)
        scope = anyio.CancelScope()
        progress: EventLog[float] = EventLog("progress")

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        async def run_call() -> None:
            with scope:
                await c.call_tool("wait_forever", {}, progress_callback=on_progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_call)
            # Its progress says the call runs at the upstream.
            await progress.wait_for(lambda _: True, what="the wait_forever progress")
            scope.cancel()
        # The tool itself saw its cancellation (the server only learns of it from the closed
        # stream); it records it as its handler unwinds, which may trail the next call.
        with anyio.fail_after(READ_TIMEOUT):
            while await cancelled_waits(c) != before + 1:
                await anyio.sleep(0.05)
        assert text_of((await c.call_tool("echo", {"text": "after"})).content[0]) == "echo: after"


async def test_list_changed_arrives_once_after_a_subscription_change_over_http(modern_http: Any) -> None:
    """Subscribing replaces the bridge's `subscriptions/listen` stream; the old one is closed."""
    assert PROXY is not None and modern_http.url is not None
    cmd = [PROXY, "proxy", "--model", "passthrough", "--url", modern_http.url]
    async with connect(cmd, "legacy", "test_reverse_bridge http listen") as conn:
        c = conn.client
        await c.subscribe_resource(NOTES_URI)
        mark = conn.wire.mark()
        added = await c.call_tool("add_tool", {"name": "http_late_tool"})
        assert text_of(added.content[0]) == "added http_late_tool"
        await conn.wire.wait_for(
            lambda m: m.direction == "in" and m.method == "notifications/tools/list_changed", start=mark,
            what="notifications/tools/list_changed",
        )
        # A later exchange with the upstream: an old stream still open would have delivered its
        # copy of the notification by its answer.
        assert text_of((await c.call_tool("echo", {"text": "after"})).content[0]) == "echo: after"
        mark_updates = conn.wire.mark()
        await c.call_tool("add_note", {"text": "over http"})
        await conn.wire.wait_for(
            lambda m: m.direction == "in" and m.method == "notifications/resources/updated", start=mark_updates,
            what="notifications/resources/updated",
        )
        assert len(conn.inbound("notifications/tools/list_changed", mark)) == 1


async def test_the_admin_api_shows_each_servers_era(home: Path, tmp_path: Path) -> None:
    """`GET /api/servers` carries each server's era as last seen (its session connects them)."""
    import re
    import urllib.request

    assert PROXY is not None
    token = "reverse-bridge-admin-token-0123456789"
    tokens = tmp_path / "admin-tokens"
    tokens.write_text(f"ops {token}\n", encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    argv = [PROXY, "serve", "mixed", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
            "--admin-tokens", str(tokens)]
    with ServedProcess(argv, env, ready="admin listening on ") as served:
        found = re.search(r"admin listening on (\S+)", served.stderr_text())
        assert found is not None, served.stderr_text()
        request = urllib.request.Request(found.group(1).rstrip("/") + "/api/servers",
                                         headers={"Authorization": f"Bearer {token}"})

        def fetch() -> Any:
            with urllib.request.urlopen(request, timeout=READ_TIMEOUT) as answer:  # noqa: S310
                return json.load(answer)

        servers = {s["name"]: s for s in (await anyio.to_thread.run_sync(fetch))["servers"]}
    assert servers["modern"]["era"]["era"] == "stateless" and servers["modern"]["era"]["bridged"] is True
    assert servers["legacy"]["era"]["era"] == "handshake"
