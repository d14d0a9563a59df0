"""Replicas that act as one: three `mcpctl serve PROJECT --store redis://...` replicas
behind the round-robin balancer (`tests/fixtures/round_robin.py`, no affinity), a real
`redis-server`, the official Python client.

* Configuration shared between replicas: each replica has its own project store (its own
  `MCPCTL_HOME`, as on separate hosts), so only the shared store can carry a change. A tool hidden
  through replica A's admin API (`POST /api/apply`) is hidden on B and C too: the session served by
  them no longer lists it, a call is refused and the upstream never sees it, and `list_changed`
  arrives; `mcpctl apply` into one replica's store directory reaches the others the same way. A
  document that does not validate is refused where it was applied and never published; a
  generation a replica cannot build is refused there, naming the document, and its running
  config stays.
* `resources/subscribe`/`unsubscribe` and `logging/setLevel` sent through one replica reach the
  upstreams the session runs on the others (`tests/fixtures/replica_upstream.py`: one process per
  replica-session, which says what it was told).
* `--replica-idle-timeout`: a replica's idle copy of a session ends and stops its upstream; the
  session goes on through any replica.

What crosses replicas through Redis pub/sub is not instantaneous, so where a test needs another
replica to have heard something it waits for that replica's own log line or for what its
upstream says, bounded by EVENT_TIMEOUT; nothing sleeps.

Runs when `MCP_HTTP_PROXY` names the mcpctl binary.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
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
from conftest import EVENT_TIMEOUT, FIXTURES, READ_TIMEOUT, EventLog, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from test_replicas import RedisServer, key_file, seal  # noqa: E402

sys.path.insert(0, str(FIXTURES))
from round_robin import RoundRobin  # noqa: E402

pytestmark = pytest.mark.anyio

UPSTREAM = FIXTURES / "replica_upstream.py"
ADMIN_TOKEN = "fleet-admin-token-0123456789abcdef"
URI = "mem://watched"


def server_doc(record: Path) -> str:
    env = json.dumps({"REPLICA_UPSTREAM_LOG": str(record)})
    return (f"kind: Server\nmetadata: {{ name: up }}\nspec:\n  command: {sys.executable}\n"
            f"  args: [\"{UPSTREAM}\"]\n  env: {env}\n")


def project_doc(hidden: list[str] = ()) -> str:
    text = "kind: Project\nmetadata: { name: fleet }\nspec:\n  servers: [up]\n  proxyModel: passthrough\n"
    if hidden:
        text += f"  routes: {{ hidden: [{', '.join(hidden)}] }}\n"
    return text


class Lines:
    """One replica's stderr lines (a list the reader thread appends to), awaitable."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def append(self, line: str) -> None:
        self.lines.append(line)

    def mark(self) -> int:
        return len(self.lines)

    async def wait_for(self, pred: Callable[[str], bool], *, start: int = 0, what: str) -> str:
        with anyio.move_on_after(EVENT_TIMEOUT):
            while True:
                found = next((line for line in self.lines[start:] if pred(line)), None)
                if found is not None:
                    return found
                await anyio.sleep(0.02)
        pytest.fail(f"timed out waiting for {what}; stderr:\n{''.join(self.lines[-60:])}")


class Replica:
    """`mcpctl serve fleet --store URL` with its own store and an admin listener."""

    def __init__(self, home: Path, redis: RedisServer, flags: list[str]) -> None:
        self.home = home
        self.stderr = Lines()
        tokens = home / "admin-tokens"
        tokens.write_text(f"ops {ADMIN_TOKEN}\n")
        self.served = ServedProcess(
            [HTTP or "", "serve", "fleet", "--listen", "127.0.0.1:0", "--store", redis.url,
             "--state-key-file", str(key_file(home)), "--admin-listen", "127.0.0.1:0", "--admin-tokens", str(tokens), *flags],
            {**os.environ, "MCPCTL_HOME": str(home), "MCPCTL_LOG": "info"},
            self.stderr.lines,
            ready="admin listening on ",
            failure="mcpctl serve --store did not start",
        )
        self.url = self.served.url or ""
        self.admin = next(line for line in self.stderr.lines
                          if line.startswith("admin listening on ")).split()[-1].rstrip("/")

    def stop(self) -> None:
        self.served.stop()


class Fleet:
    """Three replicas, each with its own project store, behind a round-robin balancer."""

    def __init__(self, tmp_path: Path, flags: list[str]) -> None:
        self.record = tmp_path / "upstream.jsonl"
        self.data = tmp_path / "redis"
        self.data.mkdir()
        self.redis = RedisServer(self.data)
        self.replicas: list[Replica] = []
        self.balancer: RoundRobin | None = None
        try:
            for n in range(3):
                home = tmp_path / f"home{n}"
                mcpctl(home, "apply", "-f", "-", stdin=f"{server_doc(self.record)}\n---\n{project_doc()}")
                self.replicas.append(Replica(home, self.redis, flags))
            self.balancer = RoundRobin([r.url.split("://", 1)[1].split("/", 1)[0] for r in self.replicas])
        except BaseException:
            self.stop()
            raise
        self.url = self.balancer.url

    def stderr(self) -> str:
        return "\n".join(f"--- replica {n}\n" + "".join(r.stderr.lines) for n, r in enumerate(self.replicas))

    def recorded(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
        for replica in self.replicas:
            replica.stop()
        self.redis.stop()


@contextmanager
def fleet(tmp_path: Path, flags: list[str] | None = None) -> Iterator[Fleet]:
    running = Fleet(tmp_path, flags or [])
    try:
        yield running
    finally:
        running.stop()


def mcpctl(home: Path, *args: str, stdin: str | None = None) -> None:
    import subprocess

    done = subprocess.run([HTTP or "", *args], env={**os.environ, "MCPCTL_HOME": str(home)}, input=stdin,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def client(url: str) -> AsyncIterator[tuple[Client, EventLog[Any]]]:
    """The official client through the balancer, with every notification it receives."""
    heard: EventLog[Any] = EventLog("notifications")

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None):
            heard.append(message)

    async def on_log(params: Any) -> None:
        heard.append(params)

    async with Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                      message_handler=on_message, logging_callback=on_log, cache=None,
                      client_info=types.Implementation(name="fleet", version="1.0.0")) as connected:
        yield connected, heard


async def text(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    result = await c.call_tool(tool, arguments or {})
    assert not result.is_error, result
    return text_of(result.content[0])


async def on_every_replica(c: Client, group: Fleet) -> None:
    """Three requests in a row: round robin sends one to each replica, so each runs the session
    (and its upstream) from here on."""
    assert group.balancer is not None
    before = list(group.balancer.served)
    for _ in range(3):
        await text(c, "whoami")
    served = [after - b for after, b in zip(group.balancer.served, before)]
    assert all(n >= 1 for n in served), served


async def until_every_upstream(c: Client, tool: str, arguments: dict[str, Any], says: str) -> set[str]:
    """Calls `tool` until three different upstream processes (one per replica) answered with
    `says`; returns their pids. Bounded by EVENT_TIMEOUT."""
    pids: set[str] = set()
    with anyio.fail_after(EVENT_TIMEOUT):
        while len(pids) < 3:
            answer = await text(c, tool, arguments)
            if says in answer:
                pids.add(answer.split()[1])
    return pids


# --------------------------------------------------------------------------- configuration


async def test_a_tool_hidden_through_one_replicas_admin_api_is_hidden_on_the_others(tmp_path: Path) -> None:
    with fleet(tmp_path) as group:
        async with client(group.url) as (c, heard):
            assert "secret" in {t.name for t in (await c.list_tools()).tools}
            await on_every_replica(c, group)
            marks = [r.stderr.mark() for r in group.replicas]
            start = heard.mark()
            a, others = group.replicas[0], group.replicas[1:]
            async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as api:
                answer = await api.post(f"{a.admin}/api/apply", content=project_doc(hidden=["secret"]),
                                        headers={"Authorization": f"Bearer {ADMIN_TOKEN}",
                                                 "Content-Type": "application/yaml"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["reload"]["state"] == "reloaded", answer.json()
            # A generation fence: A answers once B and C run the change too, so the very next
            # requests are refused whichever replica serves them (no wait for their logs first).
            assert answer.json()["reload"]["replicasBehind"] == [], answer.json()
            fenced = list(group.balancer.served)
            for _ in range(3):
                with pytest.raises(MCPError):
                    await c.call_tool("secret", {})
            served = [after - b for after, b in zip(group.balancer.served, fenced)]
            assert all(n >= 1 for n in served), served
            # B and C reload the shared generation (routes first, then servers), each logging it.
            for replica, mark in zip(others, marks[1:]):
                await replica.stderr.wait_for(
                    lambda line: "of the shared configuration): generation" in line and "routes" in line,
                    start=mark, what="the shared configuration's reload on another replica")
            # Their own store now holds the change too (a restart keeps it).
            for replica in others:
                assert "secret" in (replica.home / "projects" / "fleet.yaml").read_text()
            await heard.wait_for(lambda m: getattr(m, "method", None) == "notifications/tools/list_changed",
                                 start=start, what="tools/list_changed")
            called_before = [r for r in group.recorded() if r["method"] == "tools/call"
                             and r["params"].get("name") == "secret"]
            before = list(group.balancer.served)
            for _ in range(3):
                assert "secret" not in {t.name for t in (await c.list_tools()).tools}
            for _ in range(3):
                with pytest.raises(MCPError):
                    await c.call_tool("secret", {})
            served = [after - b for after, b in zip(group.balancer.served, before)]
            assert all(n >= 2 for n in served), served
            called_after = [r for r in group.recorded() if r["method"] == "tools/call"
                            and r["params"].get("name") == "secret"]
            assert called_after == called_before == [], "a hidden tool never reaches an upstream"
        # A replica that starts later, from a store that predates the change, runs the newest
        # generation from the start.
        late = tmp_path / "home-late"
        mcpctl(late, "apply", "-f", "-", stdin=f"{server_doc(group.record)}\n---\n{project_doc()}")
        fourth = Replica(late, group.redis, [])
        try:
            assert any("took the shared configuration's newest generation" in line for line in fourth.stderr.lines), \
                "".join(fourth.stderr.lines)
            assert "secret" in (late / "projects" / "fleet.yaml").read_text()
        finally:
            fourth.stop()


async def test_mcpctl_apply_into_one_replicas_store_reaches_the_others(tmp_path: Path) -> None:
    with fleet(tmp_path) as group:
        async with client(group.url) as (c, heard):
            await on_every_replica(c, group)
            marks = [r.stderr.mark() for r in group.replicas]
            start = heard.mark()
            # Into replica C's own store directory, as an operator on C's host would.
            mcpctl(group.replicas[2].home, "apply", "-f", "-", stdin=project_doc(hidden=["touch"]))
            for replica, mark in zip(group.replicas[:2], marks[:2]):
                await replica.stderr.wait_for(
                    lambda line: "of the shared configuration): generation" in line and "routes" in line,
                    start=mark, what="the shared configuration's reload on another replica")
            await heard.wait_for(lambda m: getattr(m, "method", None) == "notifications/tools/list_changed",
                                 start=start, what="tools/list_changed")
            for _ in range(3):
                names = {t.name for t in (await c.list_tools()).tools}
                assert "touch" not in names and "whoami" in names, names


async def test_a_document_a_replica_cannot_build_is_refused_there_and_its_config_stays(tmp_path: Path) -> None:
    with fleet(tmp_path) as group:
        async with client(group.url) as (c, _heard):
            await on_every_replica(c, group)
            a, b = group.replicas[0], group.replicas[1]
            marks = [r.stderr.mark() for r in group.replicas]
            wrong = project_doc().replace("proxyModel: passthrough", "proxyModel: nosuchmodel")
            async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as api:
                answer = await api.post(f"{a.admin}/api/apply", content=wrong,
                                        headers={"Authorization": f"Bearer {ADMIN_TOKEN}",
                                                 "Content-Type": "application/yaml"})
            # Validated where it was applied, before anything is published: the others never
            # hear of it.
            assert answer.status_code == 400 or answer.json()["reload"]["state"] == "refused", answer.text
            # A generation this build cannot run (as a replica of another build could publish):
            # every replica refuses it, naming the document, and keeps running what it ran.
            documents = {"projects/fleet.yaml": wrong, "servers/up.yaml": server_doc(group.record)}
            # Written as a replica with the key would (signed): refused for what it says.
            redis_cli(group.redis, "HSET", "mcpm:{fleet}:config", "generation", "99", "documents",
                      seal("mcpm:{fleet}:config", "documents:99", json.dumps(documents, sort_keys=True)))
            redis_cli(group.redis, "PUBLISH", "mcpm:{fleet}:config-changed", "99")
            for replica, mark in zip(group.replicas, marks):
                refusal = await replica.stderr.wait_for(
                    lambda line: "generation 99 of the shared configuration" in line and "refused" in line,
                    start=mark, what="the replica refusing the generation it cannot build")
                assert "nosuchmodel" in refusal and "fleet" in refusal, refusal
            assert not any("of the shared configuration" in line and "refused" not in line
                           for line in b.stderr.lines[marks[1]:]), b.stderr.lines[marks[1]:]
            for _ in range(3):
                assert (await text(c, "whoami")).startswith("pid ")
            assert "whoami" in {t.name for t in (await c.list_tools()).tools}


def redis_cli(redis: RedisServer, *args: str) -> None:
    import subprocess

    done = subprocess.run(["redis-cli", "-p", str(redis.port), *args], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------- handshake changes


async def test_subscribe_through_one_replica_reaches_the_upstreams_on_the_others(tmp_path: Path) -> None:
    with fleet(tmp_path) as group:
        async with client(group.url) as (c, heard):
            await on_every_replica(c, group)
            start = heard.mark()
            await c.subscribe_resource(URI)
            # Every replica's upstream of the session is subscribed, not only the one the
            # subscribe went through: each reports an update when its resource changes.
            pids = await until_every_upstream(c, "touch", {"uri": URI}, "(subscribed)")
            assert len(pids) == 3
            updates = await heard.wait_for(
                lambda m: getattr(m, "method", None) == "notifications/resources/updated",
                start=start, count=3, what="resources/updated from every replica's upstream")
            assert all(str(m.params.uri) == URI for m in updates), updates
            await c.unsubscribe_resource(URI)
            await until_every_upstream(c, "touch", {"uri": URI}, "(not subscribed)")


async def test_set_level_through_one_replica_changes_what_the_others_upstreams_send(tmp_path: Path) -> None:
    with fleet(tmp_path) as group:
        async with client(group.url) as (c, heard):
            await on_every_replica(c, group)
            assert "logs at debug" in await text(c, "log")
            await c.set_logging_level("error")
            await until_every_upstream(c, "log", {}, "logs at error")
            # From here on no upstream of the session sends below `error`.
            for n in range(3):
                assert "logs at error" in await text(c, "log", {"tag": f"final-{n}"})
            logged = await heard.wait_for(lambda m: "final-" in str(getattr(m, "data", "")),
                                          count=3, what="the last calls' log messages")
            final = [m for m in heard.items if "final-" in str(getattr(m, "data", ""))]
            assert {m.level for m in final} == {"error"} and len(final) == 3, (logged, final)


# --------------------------------------------------------------------------- replica idle timeout


async def test_an_idle_replica_copy_stops_its_upstream_and_the_session_goes_on(tmp_path: Path) -> None:
    with fleet(tmp_path, ["--replica-idle-timeout", "1"]) as group:
        assert group.balancer is not None
        async with client(group.url) as (c, _heard):
            await on_every_replica(c, group)
            # The replica holding the client's GET stream keeps its copy (the client is
            # connected there); the others have nothing open for it.
            holder = next(i for i, line, _ in reversed(group.balancer.requests) if line.startswith("GET "))
            idle = [r for n, r in enumerate(group.replicas) if n != holder]
            pids = [upstream_pids(r) for r in idle]
            assert all(len(p) == 1 for p in pids), pids
            restored_before = restored(group)
            # Nothing asks for a while: each of them ends its copy, and its upstream stops.
            for replica in idle:
                await replica.stderr.wait_for(lambda line: "ending an idle HTTP session" in line,
                                              what="the replica ending its idle copy")
            with anyio.fail_after(EVENT_TIMEOUT):
                while any(alive(pid) for p in pids for pid in p):
                    await anyio.sleep(0.05)
            # The session itself lives on in the store: the replicas restore it again.
            for _ in range(3):
                assert (await text(c, "whoami")).startswith("pid ")
            assert restored(group) >= restored_before + 2, group.stderr()


def upstream_pids(replica: Replica) -> set[int]:
    """The upstream processes the replica started (its log says `started upstream ... pid=N`)."""
    return {int(line.split(" pid=")[1].split()[0]) for line in replica.stderr.lines
            if "started upstream" in line and " pid=" in line}


def restored(group: Fleet) -> int:
    return sum("restored from the shared store" in line for r in group.replicas for line in r.stderr.lines)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its replica) has stopped as well.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
