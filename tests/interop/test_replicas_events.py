"""The shared SSE event store and server-to-client requests across replicas.

Three `mcpctl serve shared --store redis://...` replicas (a real `redis-server`) behind the
round-robin balancer of `test_replicas.py`, in front of one shared upstream: the reference
server in streamableHttp mode (so a replica killed here leaves no child behind).

- A long tool call with progress streams from one replica; the client's connection breaks and
  it resumes (`Last-Event-ID`) on another replica: it gets every progress event once, in
  order, then the result the first replica's upstream produced.
- The replica serving a long call is killed: the official client resumes through the balancer
  on another replica, gets the events it had not seen, then a clear error naming the replica
  that is gone; never a hang.
- A sampling request from one replica's upstream is answered by the official client through
  another replica, and the answer reaches the upstream that asked.
- The answer to a sampling request whose replica was killed gets `410 Gone` naming it.
- The log level set through one replica while subscriptions change through another, at once:
  a third replica restores both, and each racing replica's upstream ends up told both.

Raw HTTP where the test must choose the replica (the SDK cannot say which one to resume on).
Runs when `MCP_HTTP_PROXY` names the mcpctl binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

HTTP = os.environ.get("MCP_HTTP_PROXY")
if not HTTP:
    pytest.skip("MCP_HTTP_PROXY is not set: replicas are mcpctl serve processes", allow_module_level=True)

import anyio  # noqa: E402
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import EVENT_TIMEOUT, FIXTURES, READ_TIMEOUT, SERVER_JS, ServedProcess, free_port, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from test_replicas import ACCEPT, Replicas, replicas  # noqa: E402

pytestmark = pytest.mark.anyio

PROTOCOL = "2025-11-25"
STEPS = 8
LONG = {"duration": 4, "steps": STEPS}
DONE = f"Long running operation completed. Duration: 4 seconds, Steps: {STEPS}."


@contextmanager
def group_over_http_upstream(tmp_path: Path) -> Iterator[Replicas]:
    """The reference server over HTTP, and three replicas of a passthrough project on it."""
    port = free_port()
    upstream = ["node", str(SERVER_JS), "streamableHttp"]
    with ServedProcess(upstream, {**os.environ, "PORT": str(port)}, ready="listening on port",
                       failure="node did not start"):
        with replicas(tmp_path, "passthrough", f"everything:  url: http://127.0.0.1:{port}/mcp") as group:
            yield group


def kill(group: Replicas, index: int) -> None:
    """Kills replica `index` at once (no graceful shutdown: its open streams just break)."""
    proc = group.procs[index].proc
    proc.kill()
    proc.wait(10)


class Sse:
    """Reads the SSE events of a streaming response: (id, message) per event with data."""

    def __init__(self, response: httpx2.Response) -> None:
        self.lines = response.aiter_lines()

    async def next(self) -> tuple[str | None, dict[str, Any]]:
        event_id: str | None = None
        data: list[str] = []
        async for line in self.lines:
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif not line and data and "".join(data):
                return event_id, json.loads("".join(data))
            elif not line:
                event_id, data = None, []
        raise AssertionError("the stream ended")


async def start_session(http: httpx2.AsyncClient, url: str, capabilities: dict[str, Any]) -> dict[str, str]:
    init = await http.post(url, headers=ACCEPT, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": capabilities,
                   "clientInfo": {"name": "replica-events", "version": "1.0.0"}}})
    assert init.status_code == 200, init.text
    headers = {**ACCEPT, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    note = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202, note.text
    return headers


def long_call(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "trigger-long-running-operation", "arguments": LONG,
                       "_meta": {"progressToken": "steps"}}}


def seq_of(event_id: str | None) -> tuple[int, int]:
    assert event_id is not None, "an event of a resumable stream without an id"
    stream, seq = event_id.split("-")
    return int(stream), int(seq)


async def test_a_broken_stream_resumes_on_another_replica_and_carries_on(tmp_path: Path) -> None:
    with group_over_http_upstream(tmp_path) as group:
        first, second = group.urls()[0], group.urls()[1]
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
            headers = await start_session(http, first, {})
            seen: list[tuple[str | None, dict[str, Any]]] = []
            with anyio.fail_after(READ_TIMEOUT):
                async with http.stream("POST", first, headers=headers, json=long_call(7)) as response:
                    assert response.status_code == 200
                    events = Sse(response)
                    while len(seen) < 2:
                        seen.append(await events.next())
                # The connection broke (closed here); the call goes on upstream of `first`.
                last_id = seen[-1][0]
                assert last_id is not None
                async with http.stream("GET", second, headers={**headers, "last-event-id": last_id}) as resumed:
                    assert resumed.status_code == 200, await resumed.aread()
                    events = Sse(resumed)
                    while "id" not in seen[-1][1] or seen[-1][1].get("method"):
                        seen.append(await events.next())
        progress = [m["params"]["progress"] for _, m in seen[:-1]]
        assert progress == list(range(1, STEPS + 1)), (progress, group.stderr())
        assert all(m["params"]["progressToken"] == "steps" for _, m in seen[:-1])
        numbers = [seq_of(i) for i, _ in seen]
        assert len({stream for stream, _ in numbers}) == 1 and [n for _, n in numbers] == list(range(1, STEPS + 2))
        answer = seen[-1][1]
        assert answer["id"] == 7 and text_of_result(answer) == DONE, answer
        assert "resuming another replica's stream" in "".join(group.logs[1]), group.stderr()


def text_of_result(message: dict[str, Any]) -> str:
    return message["result"]["content"][0]["text"]


async def test_the_replica_of_a_long_call_killed_the_client_resumes_elsewhere_and_learns_it(tmp_path: Path) -> None:
    with group_over_http_upstream(tmp_path) as group:
        progress: list[float] = []
        two = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)
            if len(progress) == 2:
                two.set()

        async with Client(streamable_http_client(group.url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                          client_info=types.Implementation(name="replica-events", version="1.0.0"),
                          cache=None) as c:
            outcome: dict[str, Any] = {}

            async def call() -> None:
                try:
                    outcome["result"] = await c.call_tool("trigger-long-running-operation", LONG,
                                                          progress_callback=on_progress)
                except MCPError as err:
                    outcome["error"] = err

            with anyio.fail_after(READ_TIMEOUT):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call)
                    await two.wait()
                    (serving,) = [i for i, line, body in group.balancer.requests
                                  if line.startswith("POST") and b"trigger-long-running-operation" in body]
                    kill(group, serving)
        assert "error" in outcome, (outcome, group.stderr())
        message = str(outcome["error"])
        assert "has stopped" in message and "the request was lost" in message, message
        # Every event the dead replica sent came once, in order; the call could not finish.
        assert progress == list(range(1, len(progress) + 1)) and 2 <= len(progress) < STEPS, progress
        others = "".join("".join(lines) for i, lines in enumerate(group.logs) if i != serving)
        assert "resuming another replica's stream" in others, group.stderr()


async def test_a_sampling_request_answered_through_another_replica_reaches_the_upstream_that_asked(
        tmp_path: Path) -> None:
    asked: list[str] = []

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(text_of(params.messages[0].content))
        return types.CreateMessageResult(role="assistant", model="replica-events",
                                         content=types.TextContent(type="text", text="answered across replicas"))

    with group_over_http_upstream(tmp_path) as group:
        async with Client(streamable_http_client(group.url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                          client_info=types.Implementation(name="replica-events", version="1.0.0"),
                          sampling_callback=sample, cache=None) as c:
            # Every replica stays up: the client's `notifications/initialized` went to another
            # replica than the one that created the session, and the creator's upstream (the
            # reference server only offers its sampling tool once initialized) must have
            # learned it through the handshake fan-out.
            (creator,) = [i for i, line, body in group.balancer.requests if b'"method":"initialize"' in body]
            # The client posts it in the background once `initialize` is answered.
            noted = await anyio.to_thread.run_sync(
                group.balancer.wait_for, lambda request: b"notifications/initialized" in request[2], READ_TIMEOUT)
            assert noted is not None, group.balancer.requests
            assert noted[0] != creator, (creator, group.balancer.requests)
            crossed: list[str] = []
            called: set[int] = set()
            for n in range(6):
                mark = len(group.balancer.requests)
                with anyio.fail_after(READ_TIMEOUT):
                    result = await c.call_tool("trigger-sampling-request", {"prompt": f"round {n}"})
                assert not result.is_error, (result, group.stderr())
                assert "answered across replicas" in text_of(result.content[0]), result
                posts = [(i, body) for i, line, body in group.balancer.requests[mark:] if line.startswith("POST")]
                (call,) = [i for i, body in posts if b"trigger-sampling-request" in body]
                called.add(call)
                (answer,) = [(i, json.loads(body)) for i, body in posts if b'"result"' in body and b"model" in body]
                assert answer[1]["id"].startswith("mcpm:"), answer
                if answer[0] != call:
                    crossed.append(answer[1]["id"])
            # Round robin over the three replicas: the creator served a call, and some answers
            # went to another replica than the one that asked.
            assert creator in called, (creator, called, group.balancer.requests)
            assert crossed, ("every answer went to the replica that asked", group.balancer.requests)
        assert asked == [f"Resource trigger-sampling-request context: round {n}" for n in range(6)], asked


async def test_an_answer_for_a_replica_that_died_is_refused_naming_it(tmp_path: Path) -> None:
    with group_over_http_upstream(tmp_path) as group:
        first, second = group.urls()[0], group.urls()[1]
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
            headers = await start_session(http, first, {"sampling": {}})
            request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "trigger-sampling-request", "arguments": {"prompt": "orphan"}}}
            with anyio.fail_after(READ_TIMEOUT):
                async with http.stream("POST", first, headers=headers, json=request) as response:
                    events = Sse(response)
                    _, asked = await events.next()
                    assert asked["method"] == "sampling/createMessage", asked
                    kill(group, 0)
                reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {
                    "role": "assistant", "model": "m", "content": {"type": "text", "text": "too late"}}}
                posted = await http.post(second, headers=headers, json=reply)
        assert posted.status_code == 410, posted.text
        error = posted.json()["error"]
        tag = asked["id"].split(":")[1]
        assert f"the replica {tag} that sent request" in error["message"], error
        assert "has stopped" in error["message"], error


async def test_log_lines_name_a_session_by_its_derived_id_never_by_its_session_id(tmp_path: Path) -> None:
    with group_over_http_upstream(tmp_path) as group:
        first, second = group.urls()[0], group.urls()[1]
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
            headers = await start_session(http, first, {})
            # Restored on the second replica, which logs it (info).
            listed = await http.post(second, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            assert listed.status_code == 200, listed.text
        sid = headers["mcp-session-id"]
        derived = "http-" + hashlib.sha256(sid.encode()).hexdigest()[:24]
        logs = group.stderr()
        assert f"session={derived}" in logs, logs
        # Neither the header's value nor a part of it (the credential on this front).
        assert sid[:8] not in logs, logs


async def test_a_client_cancelling_a_server_request_through_another_replica_reaches_the_upstream_that_asked(
        tmp_path: Path) -> None:
    received = tmp_path / "received.jsonl"
    script = FIXTURES / "scripted_upstream.py"
    server = (f"scripted:  command: {sys.executable}\n  args: [\"{script}\"]\n"
              f"  env:\n    SCRIPTED_LOG: \"{received}\"")
    with replicas(tmp_path, "passthrough", server) as group:
        first, second, third = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
            headers = await start_session(http, first, {"sampling": {}})
            ask = {"jsonrpc": "2.0", "id": 7, "method": "ask", "params": {"q": "withdrawn"}}
            with anyio.fail_after(READ_TIMEOUT):
                async with http.stream("POST", second, headers=headers, json=ask) as response:
                    _, asked = await Sse(response).next()
                    assert asked["method"] == "custom/question", asked
                    assert str(asked["id"]).startswith("mcpm:"), asked
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": asked["id"], "reason": "the user withdrew it"}}
                    posted = await http.post(third, headers=headers, json=cancel)
                    assert posted.status_code == 202, posted.text
                    # The second replica's upstream gets it under the id it gave its request:
                    # it answers `state_when` once it has.
                    await rpc(http, second, headers, 8, "state_when", {"cancelled": 1})
                    entries = [json.loads(line) for line in received.read_text(encoding="utf-8").splitlines()]
                    (sent,) = [e["id"] for e in entries if e["method"] == "ask"]
                    cancels = [e for e in entries if e["method"] == "notifications/cancelled"]
        assert [c["requestId"] for c in cancels] == [f"q-{sent}"], (entries, group.stderr())


async def test_an_upstream_withdrawing_its_request_tells_the_client_under_the_tagged_id(tmp_path: Path) -> None:
    script = FIXTURES / "scripted_upstream.py"
    server = f"scripted:  command: {sys.executable}\n  args: [\"{script}\"]"
    with replicas(tmp_path, "passthrough", server) as group:
        first, second, _ = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
            headers = await start_session(http, first, {"sampling": {}})
            call = {"jsonrpc": "2.0", "id": 8, "method": "ask_withdrawn"}
            with anyio.fail_after(READ_TIMEOUT):
                async with http.stream("POST", second, headers=headers, json=call) as response:
                    events = Sse(response)
                    seen = [(await events.next())[1] for _ in range(3)]
        asked, withdrawn, answered = seen
        assert asked["method"] == "custom/question" and str(asked["id"]).startswith("mcpm:"), seen
        assert withdrawn["method"] == "notifications/cancelled", seen
        assert withdrawn["params"]["requestId"] == asked["id"], seen
        assert answered["id"] == 8 and answered["result"] == {"withdrawn": True}, seen


async def test_initialized_through_another_replica_reaches_each_upstream_once(tmp_path: Path) -> None:
    script = FIXTURES / "scripted_upstream.py"
    server = f"scripted:  command: {sys.executable}\n  args: [\"{script}\"]"
    with replicas(tmp_path, "passthrough", server) as group:
        urls = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
            init = await http.post(urls[0], headers=ACCEPT, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                           "clientInfo": {"name": "replica-events", "version": "1.0.0"}}})
            assert init.status_code == 200, init.text
            headers = {**ACCEPT, "mcp-session-id": init.headers["mcp-session-id"],
                       "mcp-protocol-version": PROTOCOL}
            # To the second replica, which restores the session for it.
            note = await http.post(urls[1], headers=headers,
                                   json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert note.status_code == 202, note.text
            seen = []
            for n, url in enumerate([*urls, urls[0]]):
                request = {"jsonrpc": "2.0", "id": 10 + n, "method": "state"}
                async with http.stream("POST", url, headers=headers, json=request) as response:
                    assert response.status_code == 200
                    if response.headers["content-type"].startswith("text/event-stream"):
                        _, answer = await Sse(response).next()
                    else:
                        answer = json.loads(await response.aread())
                seen.append(answer["result"])
        # Each replica's upstream (the creator's too) was told exactly once; three processes.
        assert [s["initialized"] for s in seen] == [1, 1, 1, 1], (seen, group.stderr())
        assert len({s["pid"] for s in seen}) == 3, seen


LEVELS = ["debug", "info", "warning", "error"]
ROUNDS = 15
SESSIONS = 3


async def scripted_state(http: httpx2.AsyncClient, url: str, headers: dict[str, str], request_id: int) -> dict[str, Any]:
    """What the scripted upstream the replica at `url` runs for the session was told."""
    return (await rpc(http, url, headers, request_id, "state", {}))["result"]


async def rpc(http: httpx2.AsyncClient, url: str, headers: dict[str, str], request_id: int, method: str,
              params: dict[str, Any]) -> dict[str, Any]:
    request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    async with http.stream("POST", url, headers=headers, json=request) as response:
        assert response.status_code == 200, await response.aread()
        if response.headers["content-type"].startswith("text/event-stream"):
            _, answer = await Sse(response).next()
        else:
            answer = json.loads(await response.aread())
    assert "result" in answer, (method, answer)
    return answer


def told(state: dict[str, Any]) -> tuple[str | None, list[str]]:
    levels = state["log_levels"]
    return (levels[-1] if levels else None), state["subscribed"]


async def race(http: httpx2.AsyncClient, group: Replicas, a: str, b: str, c: str) -> None:
    """One session, two replicas, ROUNDS rounds at once on both: each round, the client sets the
    log level and (un)subscribes three URIs of its own through replica A, and (un)subscribes four
    other URIs through replica B, every request of a round in parallel. Replica C, which never
    served the session, restores it: its upstream is replayed the last level and exactly the
    subscriptions the client holds. Last, the level and five URIs' subscriptions are changed
    through both at the same moment: all three upstreams end on the change the store ordered
    last. A's and B's own upstreams end up told both sides' changes."""
    headers = await start_session(http, a, {})
    await scripted_state(http, b, headers, 1)  # B runs the session before the race

    def change(side: str, n: int, i: int) -> tuple[str, str]:
        """Round i's n-th change of `side`'s URIs: seven URIs each, every third round an
        unsubscribe."""
        uri = f"mem://{side}{(n + i) % 7}"
        return ("resources/unsubscribe" if (n + i) % 3 == 2 else "resources/subscribe"), uri

    expected: set[str] = set()
    for i in range(ROUNDS):
        for side, count in (("a", 3), ("b", 4)):
            for n in range(count):
                method, uri = change(side, n, i)
                (expected.discard if method == "resources/unsubscribe" else expected.add)(uri)
    ids = iter(range(100, 1_000_000))

    async def round_on(url: str, requests: list[tuple[str, dict[str, Any]]]) -> None:
        async with anyio.create_task_group() as burst:
            for method, params in requests:
                burst.start_soon(rpc, http, url, headers, next(ids), method, params)

    async def side_a() -> None:
        for i in range(ROUNDS):
            requests = [("logging/setLevel", {"level": LEVELS[i % len(LEVELS)]})]
            requests += [(m, {"uri": u}) for m, u in (change("a", n, i) for n in range(3))]
            await round_on(a, requests)

    async def side_b() -> None:
        for i in range(ROUNDS):
            await round_on(b, [(m, {"uri": u}) for m, u in (change("b", n, i) for n in range(4))])

    async with anyio.create_task_group() as race:
        race.start_soon(side_a)
        race.start_soon(side_b)
    # Last, the same concerns through both at the same moment: the store orders them,
    # so whichever it took last, every replica must end on it.
    contested = [f"mem://both{n}" for n in range(5)]
    async with anyio.create_task_group() as same:
        same.start_soon(round_on, a, [("logging/setLevel", {"level": "critical"}),
                                      *(("resources/subscribe", {"uri": u}) for u in contested)])
        same.start_soon(round_on, b, [("logging/setLevel", {"level": "alert"}),
                                      *(("resources/unsubscribe", {"uri": u}) for u in contested)])
    restored = await scripted_state(http, c, headers, 1)
    level, subscribed = told(restored)
    assert level in ("critical", "alert"), restored
    assert restored["log_levels"] == [level], restored
    assert set(subscribed) - set(contested) == expected, (restored, group.stderr())
    # A and B hear each other's changes through the store: each upstream answers `state_when`
    # once it has been told the stored handshake (bounded; on a miss, what it was told).
    for name, url in (("A", a), ("B", b)):
        state: dict[str, Any] | None = None
        with anyio.move_on_after(EVENT_TIMEOUT):
            state = (await rpc(http, url, headers, next(ids), "state_when",
                               {"level": level, "subscribed": subscribed}))["result"]
        if state is None:
            state = await scripted_state(http, url, headers, next(ids))
        assert told(state) == (level, subscribed), (name, state, restored, group.stderr())
        assert state["pid"] != restored["pid"]


async def test_concurrent_level_and_subscription_changes_on_two_replicas_are_all_restored(tmp_path: Path) -> None:
    """`race` in SESSIONS sessions at once, each with its own pair of racing replicas and its
    own restoring one."""
    script = FIXTURES / "scripted_upstream.py"
    server = f"scripted:  command: {sys.executable}\n  args: [\"{script}\"]"
    with replicas(tmp_path, "passthrough", server) as group:
        urls = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as http:
            async with anyio.create_task_group() as sessions:
                for k in range(SESSIONS):
                    sessions.start_soon(race, http, group, urls[k % 3], urls[(k + 1) % 3], urls[(k + 2) % 3])
