"""Shared fixtures for the MCP interop suite.

Tests talk through the official Python SDK client (`mcp.Client`) to the official
reference server (`@modelcontextprotocol/server-everything`), either directly or
through the proxy named by the `MCP_PROXY` environment variable (see `server_params`),
or, when `MCP_HTTP_PROXY` names a binary that serves streamable HTTP
(`BINARY serve --listen 127.0.0.1:0 -- CMD...`, printing `listening on URL` on stderr),
over streamable HTTP through that proxy (see `tapped_http`).
Stateful tests take `mcp` (a fresh server process and connection per test); tests that
leave no state behind take `shared` (one connection per module and mode).  Both are
parameterized over the client's connect modes:

* ``legacy`` - ``Client(..., mode="legacy")``: the 2025 ``initialize`` handshake.
* ``auto``   - ``Client(..., mode="auto")`` (the SDK default): probe
  ``server/discover`` (protocol 2026-07-28) first, fall back to ``initialize``
  when the server does not speak the modern protocol.

Every JSON-RPC message that crosses the client's transport is recorded (the
"wire" log) so tests can assert on what really travelled, e.g. that no late
response arrives for a cancelled request.  Tests never sleep to wait for
something: they wait on the event itself, bounded by `EVENT_TIMEOUT`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

HERE = Path(__file__).resolve().parent
SERVER_PKG = HERE / "node_modules" / "@modelcontextprotocol" / "server-everything"
SERVER_JS = SERVER_PKG / "dist" / "index.js"
LOG_DIR = HERE / ".logs"
#: Loopback servers the tests import (authorization server, recording upstreams, ...).
FIXTURES = HERE.parent / "fixtures"

#: Upper bound for any single wait on an asynchronous event (CPU may be shared with a build).
EVENT_TIMEOUT = 20.0
#: Per-request read timeout handed to the SDK, so a hung peer fails a test instead of the suite.
READ_TIMEOUT = 30.0

#: The server reads this back through its `get-env` tool: proves the environment reaches it.
ENV_MARKER_NAME = "MCP_INTEROP_MARKER"
ENV_MARKER_VALUE = "interop-marker-7f3a9c"

MODES = ("legacy", "auto")

#: A binary serving streamable HTTP in front of a stdio server: when set, every connection
#: goes over HTTP through it (see `tapped_http`).
HTTP_PROXY = os.environ.get("MCP_HTTP_PROXY")

#: The reference server's tools that it registers for every client.
#: (tools/index.js registerTools).
BASE_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
}

T = TypeVar("T")


# --------------------------------------------------------------------------- launch


def server_params() -> StdioServerParameters:
    """The command that starts the reference server, directly or through `$MCP_PROXY`."""
    server_cmd = ["node", str(SERVER_JS), "stdio"]
    env = {**os.environ, ENV_MARKER_NAME: ENV_MARKER_VALUE}
    proxy = os.environ.get("MCP_PROXY")
    if proxy:
        return StdioServerParameters(
            command=proxy,
            args=["proxy", "--model", "passthrough", "--", *server_cmd],
            env=env,
        )
    return StdioServerParameters(command=server_cmd[0], args=server_cmd[1:], env=env)


# --------------------------------------------------------------------------- event logs


class EventLog(Generic[T]):
    """An append-only list that can be awaited: `wait_for` returns once an item matches."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: list[T] = []
        self._changed = anyio.Event()

    def append(self, item: T) -> None:
        self.items.append(item)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def mark(self) -> int:
        """A position to pass as `start=` so only later items are considered."""
        return len(self.items)

    def matching(self, pred: Callable[[T], bool], start: int = 0) -> list[T]:
        return [item for item in self.items[start:] if pred(item)]

    async def wait_for(
        self,
        pred: Callable[[T], bool],
        *,
        start: int = 0,
        count: int = 1,
        timeout: float = EVENT_TIMEOUT,
        what: str = "a matching item",
    ) -> list[T]:
        """Wait until `count` items after `start` satisfy `pred`; return them."""
        try:
            with anyio.fail_after(timeout):
                while True:
                    found = self.matching(pred, start)
                    if len(found) >= count:
                        return found
                    await self._changed.wait()
        except TimeoutError:
            tail = "\n  ".join(repr(i)[:300] for i in self.items[start:][-15:])
            pytest.fail(f"[{self.name}] timed out after {timeout}s waiting for {count} x {what}; last items:\n  {tail}")


@dataclass(frozen=True)
class WireMsg:
    """One JSON-RPC message seen on the client's transport ('out' = client->server)."""

    direction: str
    data: dict[str, Any]
    t: float

    @property
    def method(self) -> str | None:
        return self.data.get("method")

    @property
    def id(self) -> Any:
        return self.data.get("id")

    @property
    def params(self) -> dict[str, Any]:
        return self.data.get("params") or {}

    @property
    def is_request(self) -> bool:
        return "method" in self.data and "id" in self.data

    @property
    def is_notification(self) -> bool:
        return "method" in self.data and "id" not in self.data

    @property
    def is_response(self) -> bool:
        return "method" not in self.data and ("result" in self.data or "error" in self.data)


def _dump(message: Any) -> dict[str, Any]:
    return message.model_dump(by_alias=True, mode="json", exclude_none=True)


class _TapRead:
    """Read-stream wrapper recording every inbound message into the wire log."""

    def __init__(self, inner: Any, wire: EventLog[WireMsg]) -> None:
        self._inner = inner
        self._wire = wire

    async def receive(self) -> SessionMessage | Exception:
        item = await self._inner.receive()
        if isinstance(item, SessionMessage):
            self._wire.append(WireMsg("in", _dump(item.message), anyio.current_time()))
        return item

    def __aiter__(self) -> _TapRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TapRead:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class _TapWrite:
    """Write-stream wrapper recording every outbound message into the wire log."""

    def __init__(self, inner: Any, wire: EventLog[WireMsg]) -> None:
        self._inner = inner
        self._wire = wire

    async def send(self, item: SessionMessage) -> None:
        self._wire.append(WireMsg("out", _dump(item.message), anyio.current_time()))
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TapWrite:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


@asynccontextmanager
async def tapped_stdio(params: StdioServerParameters, wire: EventLog[WireMsg], errlog: Any) -> AsyncIterator[Any]:
    """`stdio_client` with the server's stderr sent to `errlog` and all traffic recorded."""
    async with stdio_client(params, errlog=errlog) as (read_stream, write_stream):
        yield _TapRead(read_stream, wire), _TapWrite(write_stream, wire)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers that take `PORT`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: What `mcpctl serve` prints on stderr once it accepts connections, followed by its URL.
LISTENING = "listening on "


class ServedProcess:
    """A child process (`argv`, environment `env`) that serves once it prints a ready line on
    stderr: by default `listening on URL`, whose URL becomes `.url`; with `ready`, the first line
    containing that text. Its stderr is kept (`stderr_text()`) and, given a `stderr` sink (a
    file-like object or a list), copied there as it comes. If it is not ready within `timeout`
    (or exits), it is stopped and the test fails with `failure`, its exit status and its stderr.
    `stop()`, or leaving a `with` block, ends it: terminate, then kill after 10 s."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        stderr: Any = None,
        *,
        ready: str | None = None,
        failure: str | None = None,
        timeout: float = EVENT_TIMEOUT,
    ) -> None:
        self.argv = list(argv)
        self.url: str | None = None
        self._lines: list[str] = []
        self._sink = stderr
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        found = threading.Event()

        def pump() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                if self.url is None and line.startswith(LISTENING):
                    self.url = line.removeprefix(LISTENING).strip()
                if not found.is_set() and (line.startswith(LISTENING) if ready is None else ready in line):
                    found.set()
                self._lines.append(line)
                if isinstance(self._sink, list):
                    self._sink.append(line)
                elif self._sink is not None:
                    self._sink.write(line)
                    self._sink.flush()
            found.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not found.wait(timeout) or self.proc.poll() is not None or (ready is None and self.url is None):
            self.stop()
            what = failure or f"{self.argv[0]} did not print `listening on URL`"
            pytest.fail(f"{what} (exit status {self.proc.poll()}); stderr:\n{self.stderr_text()}")

    def stderr_text(self) -> str:
        """Everything it wrote on stderr so far."""
        return "".join(self._lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._pump.join(5)

    def __enter__(self) -> ServedProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class HttpProxy(ServedProcess):
    """`$MCP_HTTP_PROXY serve --listen 127.0.0.1:0 -- CMD...` as a child process: its URL, and
    its stderr copied to `errlog`."""

    def __init__(self, command: list[str], env: dict[str, str], errlog: Any) -> None:
        super().__init__(
            [HTTP_PROXY or "", "serve", "--listen", "127.0.0.1:0", "--", *command],
            env,
            errlog,
            failure=f"{HTTP_PROXY} did not print `listening on URL`",
        )


@asynccontextmanager
async def tapped_http(wire: EventLog[WireMsg], errlog: Any) -> AsyncIterator[Any]:
    """The reference server behind `$MCP_HTTP_PROXY`, reached over streamable HTTP, with all
    traffic recorded. The proxy (and with it the server) stops when the connection closes."""
    params = server_params()
    proxy = HttpProxy([params.command, *params.args], dict(params.env or {}), errlog)
    try:
        assert proxy.url is not None
        async with streamable_http_client(proxy.url) as (read_stream, write_stream):
            yield _TapRead(read_stream, wire), _TapWrite(write_stream, wire)
    finally:
        proxy.stop()


# --------------------------------------------------------------------------- harness


@dataclass
class Interop:
    """One live connection plus everything recorded on it."""

    mode: str
    wire: EventLog[WireMsg]
    notifications: EventLog[Any]
    logs: EventLog[types.LoggingMessageNotificationParams]
    sampling_requests: EventLog[types.CreateMessageRequestParams]
    elicitation_requests: EventLog[Any]
    roots_requests: EventLog[float]
    #: Roots answered to `roots/list`; tests may replace it and send roots/list_changed.
    roots: list[types.Root] = field(default_factory=list)
    #: Overridable answers for server->client requests.
    sampling_reply: Callable[[types.CreateMessageRequestParams], Any] | None = None
    elicitation_reply: Callable[[Any], Any] | None = None
    client: Client | None = None

    @property
    def c(self) -> Client:
        assert self.client is not None
        return self.client

    # -- wire helpers --------------------------------------------------------------
    def outbound(self, method: str, start: int = 0) -> list[WireMsg]:
        return [m for m in self.wire.items[start:] if m.direction == "out" and m.method == method]

    def inbound(self, method: str, start: int = 0) -> list[WireMsg]:
        return [m for m in self.wire.items[start:] if m.direction == "in" and m.method == method]

    def answers_to(self, server_request: WireMsg) -> list[WireMsg]:
        """The client's responses to a server->client request."""
        return [
            m for m in self.wire.items if m.direction == "out" and m.is_response and m.id == server_request.id
        ]

    def responses_to(self, request_id: Any) -> list[WireMsg]:
        return [m for m in self.wire.items if m.direction == "in" and m.is_response and m.id == request_id]

    def last_request_id(self, method: str, pred: Callable[[WireMsg], bool] = lambda m: True) -> Any:
        found = [m for m in self.outbound(method) if m.is_request and pred(m)]
        assert found, f"no outbound {method} request on the wire"
        return found[-1].id

    async def wait_log(self, pred: Callable[[types.LoggingMessageNotificationParams], bool], *, start: int = 0,
                       what: str = "a log message") -> types.LoggingMessageNotificationParams:
        return (await self.logs.wait_for(pred, start=start, what=what))[0]

    async def wait_notification(self, method: str, pred: Callable[[Any], bool] = lambda n: True, *,
                                start: int = 0) -> Any:
        found = await self.notifications.wait_for(
            lambda n: getattr(n, "method", None) == method and pred(n), start=start, what=method
        )
        return found[0]


def default_sampling_reply(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="interop sampled answer"),
        model="interop-test-model",
        stop_reason="endTurn",
    )


def default_elicitation_reply(params: Any) -> types.ElicitResult:
    if getattr(params, "mode", None) == "url":
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content={"name": "Ada Lovelace"})


@asynccontextmanager
async def open_interop(mode: str, label: str) -> AsyncIterator[Interop]:
    h = Interop(
        mode=mode,
        wire=EventLog("wire"),
        notifications=EventLog("notifications"),
        logs=EventLog("logs"),
        sampling_requests=EventLog("sampling"),
        elicitation_requests=EventLog("elicitation"),
        roots_requests=EventLog("roots"),
        roots=[types.Root(uri="file:///interop/workspace", name="Interop Workspace")],
    )

    async def on_sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        h.sampling_requests.append(params)
        return (h.sampling_reply or default_sampling_reply)(params)

    async def on_elicitation(ctx: ClientRequestContext, params: Any) -> Any:
        h.elicitation_requests.append(params)
        return (h.elicitation_reply or default_elicitation_reply)(params)

    async def on_list_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        h.roots_requests.append(anyio.current_time())
        return types.ListRootsResult(roots=list(h.roots))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        h.logs.append(params)

    async def on_message(message: Any) -> None:
        h.notifications.append(message)

    LOG_DIR.mkdir(exist_ok=True)
    with open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8") as errlog:
        errlog.write(f"\n===== {label} (mode={mode}) =====\n")
        errlog.flush()
        transport = tapped_http(h.wire, errlog) if HTTP_PROXY else tapped_stdio(server_params(), h.wire, errlog)
        client = Client(
            transport,
            mode=mode,
            read_timeout_seconds=READ_TIMEOUT,
            sampling_callback=on_sampling,
            elicitation_callback=on_elicitation,
            list_roots_callback=on_list_roots,
            logging_callback=on_log,
            message_handler=on_message,
            client_info=types.Implementation(name="mcp-interop-tests", version="1.0.0"),
            # Every list/read must reach the server (through the proxy): no client-side cache.
            cache=None,
        )
        # The handshake itself is bounded by READ_TIMEOUT (and the SDK's discover timeout).
        async with client:
            h.client = client
            # The server asks for the client's roots 350 ms after `initialized` (server/index.js)
            # and logs "Roots updated" once answered.  Let that exchange finish before the test
            # starts: it keeps tests deterministic, and a server with an unanswered roots/list
            # does not exit when its stdin closes (the SDK would wait 2 s, then SIGTERM it).
            # Not fatal here: test_client_features checks roots explicitly.
            with anyio.move_on_after(5):
                await h.logs.wait_for(lambda p: str(p.data).startswith("Roots updated"), what="initial roots sync")
            yield h


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # Session scope lets module-scoped async fixtures (`shared`) run on the same event loop.
    return "asyncio"


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def mcp(mode: str, request: pytest.FixtureRequest) -> AsyncIterator[Interop]:
    """A fresh server process and connection for this test alone (for stateful tests)."""
    async with open_interop(mode, request.node.nodeid) as h:
        yield h


@pytest.fixture(scope="module", params=MODES)
def shared_mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
async def shared(shared_mode: str, request: pytest.FixtureRequest) -> AsyncIterator[Interop]:
    """One connection per test module and mode, reused by tests that leave no state behind.

    Besides saving start-up time, it checks that a long-lived connection keeps working
    across many requests of different kinds.
    """
    async with open_interop(shared_mode, f"{request.node.nodeid} (shared)") as h:
        yield h


def pytest_sessionstart(session: pytest.Session) -> None:
    if not SERVER_JS.is_file():
        pytest.exit(f"{SERVER_JS} is missing: run `npm ci` in {HERE} first", returncode=2)
    proxy = os.environ.get("MCP_PROXY")
    if proxy and shutil.which(proxy) is None:
        pytest.exit(f"MCP_PROXY={proxy!r} is not an executable file", returncode=2)
    if HTTP_PROXY and shutil.which(HTTP_PROXY) is None:
        pytest.exit(f"MCP_HTTP_PROXY={HTTP_PROXY!r} is not an executable file", returncode=2)
    # The server's (or proxy's) stderr goes here, one section per connection. Under pytest-xdist
    # only the controller empties it (before it starts the workers, which append to it).
    LOG_DIR.mkdir(exist_ok=True)
    if not hasattr(session.config, "workerinput"):
        (LOG_DIR / "server-stderr.log").write_text("", encoding="utf-8")


def pytest_report_header(config: pytest.Config) -> list[str]:
    proxy = os.environ.get("MCP_PROXY")
    target = f"THROUGH PROXY {proxy}" if proxy else "DIRECTLY"
    if HTTP_PROXY:
        target += f", OVER STREAMABLE HTTP THROUGH {HTTP_PROXY}"
    params = server_params()
    return [f"mcp interop: reference server launched {target}: {' '.join([params.command, *params.args])}"]


@pytest.fixture
def issuer() -> Iterator[Any]:
    """A loopback OAuth authorization server (`tests/fixtures/authorization_server.py`), stopped
    after the test."""
    if str(FIXTURES) not in sys.path:
        sys.path.insert(0, str(FIXTURES))
    from authorization_server import AuthorizationServer

    with AuthorizationServer() as server:
        yield server


# --------------------------------------------------------------------------- small helpers


def text_of(block: Any) -> str:
    assert isinstance(block, types.TextContent), f"expected text content, got {block!r}"
    return block.text


def tiny_image_from_source() -> str:
    """The base64 PNG the server embeds (`MCP_TINY_IMAGE`), read from its dist sources."""
    src = (SERVER_PKG / "dist" / "tools" / "get-tiny-image.js").read_text(encoding="utf-8")
    match = re.search(r'MCP_TINY_IMAGE\s*=\s*"([A-Za-z0-9+/=]+)"', src)
    assert match, "MCP_TINY_IMAGE not found in server sources"
    return match.group(1)


def server_doc(name: str) -> str:
    return (SERVER_PKG / "dist" / "docs" / name).read_text(encoding="utf-8")
