"""Sessions that outlive their replica: `mcpctl serve PROJECT --store
redis://...` on three replicas behind a round-robin balancer without affinity.

Each test starts a real `redis-server` on a free loopback port (append-only file, so a restart
keeps what it had, as a production Redis does), three `mcpctl serve` replicas of one project
sharing it, and `tests/fixtures/round_robin.py` in front: every HTTP request goes to the next
replica. The official Python client then drives the session the way a user would: gated on one
replica, `begin_session` on another, the open tool list on a third; paginate's page 2 on
another replica; a replica killed mid-session; Redis restarted mid-run; `DELETE` ending the session
on every replica; another principal refused. The issue's scale run (100 sessions x 200 calls
over three replicas, none lost or misrouted) is `mcpctl/tests/replicas_scale.rs`: a Python
client, balancer and upstream made it take about 190 s, most of it in this process.

Runs when `MCP_HTTP_PROXY` names the mcpctl binary (skipped for the direct pass only).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

HTTP = os.environ.get("MCP_HTTP_PROXY")
if not HTTP:
    pytest.skip("MCP_HTTP_PROXY is not set: replicas are mcpctl serve processes", allow_module_level=True)

import anyio  # noqa: E402
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import (  # noqa: E402
    BASE_TOOLS,
    EVENT_TIMEOUT,
    FIXTURES,
    READ_TIMEOUT,
    SERVER_JS,
    ServedProcess,
    free_port,
    text_of,
)
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

sys.path.insert(0, str(FIXTURES))
from recording_upstream import RecordingUpstream  # noqa: E402
from round_robin import RoundRobin  # noqa: E402

pytestmark = pytest.mark.anyio

REDIS = shutil.which("redis-server")
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
FOOTER = "\n\n[page "
NEXT = re.compile(r'\{"cursor": "([^"]+)"\}\]$')
LONG = "".join(f"{n:04d} żółw 🐢 naïve line\n" for n in range(120))

# --------------------------------------------------------------------------- the store's key

# The secret every replica of these tests is given (`--state-key-file`): what the store's
# records are authenticated with and its session names derived from.
STORE_SECRET = b"a secret of at least thirty-two bytes, shared by the replicas"


def key_file(directory: Path) -> Path:
    """The replicas' `--state-key-file`, written in `directory`."""
    path = directory / "store.key"
    path.write_bytes(STORE_SECRET)
    return path


def _subkey(info: bytes) -> bytes:
    """HKDF-SHA256 of STORE_SECRET (salt `mcp-middleware shared store`), one block."""
    prk = hmac.new(b"mcp-middleware shared store", STORE_SECRET, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


def session_name(session_id: str) -> str:
    """How the store names session `session_id` in its keys: the keyed digest, hex."""
    return hmac.new(_subkey(b"store session names v1 hmac-sha256"), session_id.encode(), hashlib.sha256).hexdigest()


def seal(key: str, field: str, payload: str) -> str:
    """`payload` as the authenticated record a replica writes under `key`, `field`."""
    message = b"mcpm1."
    for part in (key.encode(), field.encode()):
        message += len(part).to_bytes(8, "big") + part
    message += payload.encode()
    tag = hmac.new(_subkey(b"store records v1 hmac-sha256"), message, hashlib.sha256).digest()
    return "mcpm1." + base64.urlsafe_b64encode(tag).decode().rstrip("=") + "." + payload


# --------------------------------------------------------------------------- redis


class RedisServer:
    """`redis-server` on 127.0.0.1:`port` with its append-only file in `directory`; ready once
    it logs that it accepts connections. `stop()` ends it; `start()` starts it again with the same data."""

    def __init__(self, directory: Path) -> None:
        assert REDIS, "redis-server is not installed (scripts/setup-interop installs it)"
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.served: ServedProcess | None = None
        self.proc: subprocess.Popen[str] | None = None
        self.start()

    def start(self) -> None:
        # Its log on stderr (`--logfile /dev/stderr`): ready once it says it accepts connections.
        self.served = ServedProcess(
            [REDIS or "", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.directory),
             "--logfile", "/dev/stderr"],
            ready="Ready to accept connections",
            failure=f"redis-server did not start on port {self.port}",
        )
        self.proc = self.served.proc

    def keys(self, pattern: str) -> list[str]:
        done = subprocess.run(["redis-cli", "-p", str(self.port), "--raw", "KEYS", pattern],
                              capture_output=True, text=True, timeout=10)
        return [line for line in done.stdout.splitlines() if line]

    def stop(self) -> None:
        if self.served is not None:
            self.served.stop()


# --------------------------------------------------------------------------- replicas


def project_yaml(model: str, server: str) -> str:
    return f"""kind: Server
metadata: {{ name: {server.split(':')[0]} }}
spec:
{server.split(':', 1)[1]}
---
kind: Project
metadata: {{ name: shared }}
spec:
  servers: [{server.split(':')[0]}]
  proxyModel: {model}
"""


EVERYTHING = f"everything:  command: node\n  args: [\"{SERVER_JS}\", \"stdio\"]"


class Replicas:
    """Three `mcpctl serve shared --store URL` replicas behind a round-robin balancer."""

    def __init__(self, home: Path, redis: RedisServer, count: int = 3, flags: list[str] | None = None) -> None:
        self.home = home
        self.redis = redis
        self.flags = flags or []
        self.logs: list[list[str]] = []
        self.procs: list[ServedProcess] = []
        for _ in range(count):
            self.procs.append(self._start())
        self.balancer = RoundRobin([p.url.split("://", 1)[1].split("/", 1)[0] for p in self.procs if p.url])
        self.url = self.balancer.url

    def _start(self) -> ServedProcess:
        lines: list[str] = []
        self.logs.append(lines)
        return ServedProcess(
            [HTTP or "", "serve", "shared", "--listen", "127.0.0.1:0", "--store", self.redis.url,
             "--state-key-file", str(key_file(self.home)), *self.flags],
            {**os.environ, "MCPCTL_HOME": str(self.home), "MCPCTL_LOG": "info"},
            lines,
            failure="mcpctl serve --store did not start",
        )

    def urls(self) -> list[str]:
        return [p.url or "" for p in self.procs]

    def stderr(self) -> str:
        return "\n".join(f"--- replica {i}\n" + "".join(lines) for i, lines in enumerate(self.logs))

    def stop(self) -> None:
        self.balancer.stop()
        for proc in self.procs:
            proc.stop()


@contextmanager
def replicas(tmp_path: Path, model: str, server: str = EVERYTHING, *, sets: list[str] | None = None,
             flags: list[str] | None = None) -> Iterator[Replicas]:
    spec = tmp_path / "project.yaml"
    text = project_yaml(model, server)
    if sets:
        text += "  config:\n" + "".join(f"    {line}\n" for line in sets)
    spec.write_text(text, encoding="utf-8")
    home = tmp_path / "home"
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    done = subprocess.run([HTTP or "", "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = tmp_path / "redis"
    data.mkdir()
    redis = RedisServer(data)
    try:
        running = Replicas(home, redis, flags=flags)
        try:
            yield running
        finally:
            running.stop()
    finally:
        redis.stop()


@asynccontextmanager
async def client(url: str, mode: str = "legacy") -> AsyncIterator[Client]:
    async with Client(
        streamable_http_client(url),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        client_info=types.Implementation(name="replicas", version="1.0.0"),
        cache=None,
    ) as connected:
        yield connected


def only_text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    return text_of(result.content[0])


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_gated_on_one_replica_opened_on_another_listed_on_a_third(tmp_path: Path, mode: str) -> None:
    with replicas(tmp_path, "gate") as group:
        async with client(group.url, mode) as c:
            before = list(group.balancer.served)
            assert [t.name for t in (await c.list_tools()).tools] == ["begin_session"]
            refused = await c.call_tool("echo", {"message": "hi"})
            assert refused.is_error and "begin_session" in text_of(refused.content[0])
            opened = await c.call_tool("begin_session", {"intent": "echo things"})
            assert not opened.is_error, opened
            names = {t.name for t in (await c.list_tools()).tools}
            assert BASE_TOOLS <= names and "begin_session" not in names, group.stderr()
            assert only_text(await c.call_tool("echo", {"message": "across"})) == "Echo: across"
            served = [after - b for after, b in zip(group.balancer.served, before)]
            assert all(n >= 1 for n in served), served
        restored = group.stderr().count("restored from the shared store")
        assert restored >= 2, group.stderr()


async def test_page_two_is_read_through_another_replica(tmp_path: Path) -> None:
    with replicas(tmp_path, "paginate", sets=["paginate: { pageBytes: 512 }"]) as group:
        async with client(group.url) as c:
            page = only_text(await c.call_tool("echo", {"message": LONG}))
            bodies: list[str] = []
            while True:
                at = page.rfind(FOOTER)
                assert at >= 0, page[:300]
                bodies.append(page[:at])
                found = NEXT.search(page[at:])
                if not found:
                    break
                page = only_text(await c.call_tool("read_page", {"cursor": found.group(1)}))
                assert len(bodies) < 100, "the pages never end"
            pages, joined = bodies, "".join(bodies)
            assert len(pages) > 3 and joined == f"Echo: {LONG}", group.stderr()


async def test_a_replica_killed_mid_session_and_the_session_goes_on(tmp_path: Path) -> None:
    with replicas(tmp_path, "gate") as group:
        async with client(group.url) as c:
            await c.call_tool("begin_session", {"intent": "survive"})
            group.procs[0].stop()
            group.procs[1].stop()
            for n in range(4):
                assert only_text(await c.call_tool("echo", {"message": f"still {n}"})) == f"Echo: still {n}"
            names = {t.name for t in (await c.list_tools()).tools}
            assert "echo" in names and "begin_session" not in names, group.stderr()


async def test_delete_ends_the_session_on_every_replica_and_no_one_else_may_use_it(tmp_path: Path) -> None:
    with replicas(tmp_path, "gate") as group:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            started = await raw.post(group.url, headers=ACCEPT, json=initialize)
            assert started.status_code == 200, started.text
            sid = started.headers["mcp-session-id"]
            session = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            for url in group.urls():
                listed = await raw.post(url, headers=session, json=listing)
                assert listed.status_code == 200 and "begin_session" in listed.text, listed.text
            stored = f"mcpm:{{shared}}:session:{session_name(sid)}"
            assert group.redis.keys(stored) == [stored]
            ended = await raw.delete(group.urls()[1], headers=session)
            assert ended.status_code == 200, ended.text
            assert group.redis.keys("mcpm:{shared}:session:*") == []
            for url in group.urls():
                gone = await raw.post(url, headers=session, json=listing)
                assert gone.status_code == 404, (url, gone.text)


async def test_another_principal_gets_404_on_every_replica(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789abcdef\nbob bob-token-0123456789abcdef0\n")
    with replicas(tmp_path, "gate", flags=["--tokens", str(tokens)]) as group:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        alice = {**ACCEPT, "authorization": "Bearer alice-token-0123456789abcdef"}
        bob = {**ACCEPT, "authorization": "Bearer bob-token-0123456789abcdef0"}
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            started = await raw.post(group.urls()[0], headers=alice, json=initialize)
            assert started.status_code == 200, started.text
            sid = {"mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            for url in group.urls():
                theirs = await raw.post(url, headers={**bob, **sid}, json=listing)
                assert theirs.status_code == 404, theirs.text
                refused = await raw.delete(url, headers={**bob, **sid})
                assert refused.status_code == 404, refused.text
            mine = await raw.post(group.urls()[2], headers={**alice, **sid}, json=listing)
            assert mine.status_code == 200 and "begin_session" in mine.text, mine.text
        # The store holds the principal, never a token.
        dump = subprocess.run(["redis-cli", "-p", str(group.redis.port), "--raw", "HGETALL",
                               f"mcpm:{{shared}}:session:{session_name(sid['mcp-session-id'])}"], capture_output=True, text=True)
        assert "alice" in dump.stdout and "alice-token" not in dump.stdout, dump.stdout


async def test_redis_restarted_mid_run(tmp_path: Path) -> None:
    with replicas(tmp_path, "gate") as group:
        async with client(group.url) as c:
            await c.call_tool("begin_session", {"intent": "outlast redis"})
            group.redis.stop()
            with pytest.raises(Exception) as failed:
                await c.call_tool("echo", {"message": "no store"})
            assert "session store" in str(failed.value) and "redis://127.0.0.1" in str(failed.value), failed.value
            group.redis.start()
            for n in range(4):
                assert only_text(await c.call_tool("echo", {"message": f"back {n}"})) == f"Echo: back {n}"
            assert "begin_session" not in {t.name for t in (await c.list_tools()).tools}, group.stderr()


class EchoUpstream(RecordingUpstream):
    """One shared HTTP upstream for every replica-session: `echo` answers with its arguments."""

    def __init__(self) -> None:
        super().__init__(tools=["echo"])

    def _result(self, method: str, params: dict[str, Any], authorization: str | None) -> dict[str, Any] | None:
        if method == "tools/call" and params.get("name") == "echo":
            return {"content": [{"type": "text", "text": json.dumps(params.get("arguments") or {})}]}
        return super()._result(method, params, authorization)


async def test_list_changed_sent_on_one_replica_reaches_the_get_stream_held_on_another(tmp_path: Path) -> None:
    # A quiet upstream: the reference server announces its own list changes each time a replica
    # starts it for the session, which would hide whether gate's came once.
    with EchoUpstream() as upstream, replicas(tmp_path, "gate", f"echo:  url: {upstream.url}") as group:
        crossed = 0
        for attempt in range(8):
            seen: list[Any] = []
            changed = anyio.Event()

            async def on_message(message: Any) -> None:
                seen.append(message)
                if getattr(message, "method", None) == "notifications/tools/list_changed":
                    changed.set()

            start = len(group.balancer.requests)
            async with Client(streamable_http_client(group.url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                              message_handler=on_message, cache=None) as c:
                # The client opens its GET stream after the handshake; wait until it has.
                opened_get = await anyio.to_thread.run_sync(
                    group.balancer.wait_for, lambda request: request[1].startswith("GET "), EVENT_TIMEOUT, start)
                assert opened_get is not None, group.balancer.requests[start:]
                opened = await c.call_tool("begin_session", {"intent": f"attempt {attempt}"})
                assert not opened.is_error, opened
                with anyio.fail_after(EVENT_TIMEOUT):
                    await changed.wait()
                kinds = [m for m in seen if getattr(m, "method", None) == "notifications/tools/list_changed"]
                assert len(kinds) == 1, ("exactly once", seen)
            sent = group.balancer.requests[start:]
            get = next(i for i, line, _ in sent if line.startswith("GET "))
            begin = next(i for i, _, body in sent if b'"begin_session"' in body)
            crossed += get != begin
            if crossed:
                break
        assert crossed, "begin_session never landed on another replica than the GET stream"
