"""What the shared store keeps besides a session's record: session quotas counted on
every replica, a stateless 2026-07-28 client's model state, paginate's documents under fields of
their own, and no store traffic for a request that changed nothing.

Same setup as `test_replicas.py` (whose fixtures these tests reuse): a real `redis-server` on a
free loopback port, three `mcpctl serve shared --store URL` replicas behind the round-robin
balancer (every request to the next replica, no affinity), the official Python client or raw
HTTP where the test must pick the replica.

Runs when `MCP_HTTP_PROXY` names the mcpctl binary (skipped for the direct pass only).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("MCP_HTTP_PROXY"):
    pytest.skip("MCP_HTTP_PROXY is not set: replicas are mcpctl serve processes", allow_module_level=True)

import anyio  # noqa: E402
import httpx2  # noqa: E402
from conftest import BASE_TOOLS, READ_TIMEOUT, text_of  # noqa: E402
from test_replicas import (  # noqa: E402
    ACCEPT,
    FOOTER,
    LONG,
    NEXT,
    EchoUpstream,
    RedisServer,
    client,
    only_text,
    replicas,
    session_name,
)

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def redis_cli(redis: RedisServer, *args: str) -> str:
    done = subprocess.run(["redis-cli", "-p", str(redis.port), "--raw", *args],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout


def command_calls(redis: RedisServer) -> dict[str, int]:
    """How many times each command ran since the last `CONFIG RESETSTAT` (INFO commandstats)."""
    calls: dict[str, int] = {}
    for line in redis_cli(redis, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, stats = line.partition(":")
            fields = dict(part.split("=", 1) for part in stats.split(","))
            calls[name.removeprefix("cmdstat_")] = int(fields["calls"])
    return calls


def data_of(body: str) -> dict[str, Any]:
    """The JSON-RPC message of a response body, plain JSON or one SSE event."""
    text = body.strip()
    if not text.startswith("{"):
        events = [line[len("data:"):].strip() for line in text.splitlines() if line.startswith("data:")]
        text = [event for event in events if event][-1]
    return json.loads(text)


async def test_the_quota_reached_through_two_replicas_refuses_the_next_session_on_a_third(tmp_path: Path) -> None:
    with replicas(tmp_path, "gate", flags=["--max-sessions-per-principal", "2"]) as group:
        first, second, third = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            sids = []
            for url in (first, second):
                started = await raw.post(url, headers=ACCEPT, json=INITIALIZE)
                assert started.status_code == 200, started.text
                sids.append(started.headers["mcp-session-id"])
            refused = await raw.post(third, headers=ACCEPT, json=INITIALIZE)
            assert refused.status_code == 503, refused.text
            error = data_of(refused.text)["error"]
            assert error["data"] == {"quota": "max-sessions-per-principal", "limit": 2}, error
            assert "--max-sessions-per-principal" in error["message"], error
            # A session ended (on yet another replica than the one that started it) frees its place.
            session = {**ACCEPT, "mcp-session-id": sids[0], "mcp-protocol-version": VERSION}
            ended = await raw.delete(third, headers=session)
            assert ended.status_code == 200, ended.text
            again = await raw.post(third, headers=ACCEPT, json=INITIALIZE)
            assert again.status_code == 200, again.text
        counted = group.redis.keys("mcpm:{shared}:quota:*")
        assert counted == ["mcpm:{shared}:quota:address:127.0.0.1"], counted
        members = redis_cli(group.redis, "ZRANGE", counted[0], "0", "-1").split()
        # Counted by name (the keyed digest), never by the session id itself.
        assert sorted(members) == sorted(session_name(s) for s in [sids[1], again.headers["mcp-session-id"]]), members


async def test_an_expired_session_stops_counting_against_the_quota(tmp_path: Path) -> None:
    flags = ["--max-sessions-per-principal", "1", "--idle-timeout", "4"]
    with replicas(tmp_path, "gate", flags=flags) as group:
        first, second, _ = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            started = await raw.post(first, headers=ACCEPT, json=INITIALIZE)
            assert started.status_code == 200, started.text
            sid = started.headers["mcp-session-id"]
            session = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
            listing = await raw.post(first, headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            assert listing.status_code == 200, listing.text
            refused = await raw.post(second, headers=ACCEPT, json=INITIALIZE)
            assert refused.status_code == 503, refused.text
            # The record expires with the idle timeout (Redis's TTL): then the place is free.
            with anyio.fail_after(20):
                while group.redis.keys(f"mcpm:{{shared}}:session:{session_name(sid)}"):
                    await anyio.sleep(0.2)
            again = await raw.post(second, headers=ACCEPT, json=INITIALIZE)
            assert again.status_code == 200, again.text


async def test_a_stateless_client_keeps_its_state_whichever_replica_serves_it(tmp_path: Path) -> None:
    with replicas(tmp_path, "gate") as group:
        async with client(group.url, "2026-07-28") as c:
            before = list(group.balancer.served)
            assert [t.name for t in (await c.list_tools()).tools] == ["begin_session"]
            opened = await c.call_tool("begin_session", {"intent": "stateless across replicas"})
            assert not opened.is_error, opened
            for _ in range(3):
                names = {t.name for t in (await c.list_tools()).tools}
                assert BASE_TOOLS <= names and "begin_session" not in names, group.stderr()
            assert only_text(await c.call_tool("echo", {"message": "anywhere"})) == "Echo: anywhere"
            served = [after - b for after, b in zip(group.balancer.served, before)]
            assert all(n >= 1 for n in served), served
        # A stateless client's record is named by a digest too (of its `stateless:` key).
        stored = group.redis.keys("mcpm:{shared}:session:*")
        assert len(stored) == 1, stored
        state = redis_cli(group.redis, "HGETALL", stored[0])
        assert '"open":true' in state.replace(" ", ""), state
        assert group.stderr().count("restored=true") >= 2, group.stderr()


async def test_a_request_that_changes_no_state_costs_one_store_round_trip(tmp_path: Path) -> None:
    with EchoUpstream() as upstream, replicas(tmp_path, "gate", f"echo:  url: {upstream.url}") as group:
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            started = await raw.post(group.urls()[0], headers=ACCEPT, json=INITIALIZE)
            assert started.status_code == 200, started.text
            sid = started.headers["mcp-session-id"]
            session = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
            begin = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "begin_session", "arguments": {"intent": "count"}}}
            opened = await raw.post(group.urls()[1], headers=session, json=begin)
            assert opened.status_code == 200 and not data_of(opened.text).get("error"), opened.text
            version = redis_cli(group.redis, "HGET", f"mcpm:{{shared}}:session:{session_name(sid)}", "v").strip()

            async def echo(url: str, n: int) -> None:
                call = {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"n": n}}}
                answer = await raw.post(url, headers=session, json=call)
                assert answer.status_code == 200, answer.text
                assert json.loads(text_of_result(data_of(answer.text))) == {"n": n}, answer.text

            # Every replica has restored the session (and its scripts are loaded) before counting.
            for n, url in enumerate(group.urls()):
                await echo(url, n)
            redis_cli(group.redis, "CONFIG", "RESETSTAT")
            for n in range(9):
                await echo(group.urls()[n % 3], n)
            calls = command_calls(group.redis)
            calls.pop("config|resetstat", None)
            calls.pop("info", None)
            # One script call per request, reading the TTL left and the states' version (what
            # it runs inside is counted too): the TTL, fresh, is not renewed, so it writes
            # nothing (no PEXPIRE of the session, no quota entry renewed). Each answer is also
            # written to the shared SSE event log as it is sent (test_replicas_events.py): one
            # more script call, RPUSH and PUBLISH on its stream's list and PEXPIRE of that
            # list, LTRIM only past the log's bound (not reached here). Not a state write.
            assert calls.pop("evalsha") == 9 + 9, calls
            assert calls.pop("pttl") == 9 and calls.pop("hget") == 9, calls
            events = {name: calls.pop(name, 0) for name in ("rpush", "publish", "pexpire")}
            assert all(n == 9 for n in events.values()), events
            assert calls == {}, calls
            after = redis_cli(group.redis, "HGET", f"mcpm:{{shared}}:session:{session_name(sid)}", "v").strip()
            assert after == version, "nothing changed, nothing written"


def text_of_result(message: dict[str, Any]) -> str:
    assert "result" in message, message
    return message["result"]["content"][0]["text"]


async def test_paged_documents_live_in_fields_of_their_own_and_read_on_every_replica(tmp_path: Path) -> None:
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
                keys = group.redis.keys("mcpm:{shared}:session:*")
                assert len(keys) == 1, keys
                sid = keys[0]
                fields = redis_cli(group.redis, "HKEYS", sid).split()
                documents = [f for f in fields if f.startswith("d:")]
                assert len(documents) == 1, fields
                # The state itself refers to the document; the text is only in its own field.
                state = next(f for f in fields if f.startswith("s:") and "paginate" in f)
                assert "żółw" not in redis_cli(group.redis, "HGET", sid, state), "the text is in the state"
                assert "żółw" in redis_cli(group.redis, "HGET", sid, documents[0])
                page = only_text(await c.call_tool("read_page", {"cursor": found.group(1)}))
                assert len(bodies) < 100, "the pages never end"
            assert len(bodies) > 3 and "".join(bodies) == f"Echo: {LONG}", group.stderr()


async def test_two_replicas_paging_one_session_at_once_keep_both_documents(tmp_path: Path) -> None:
    with replicas(tmp_path, "paginate", sets=["paginate: { pageBytes: 512 }"]) as group:
        first, second, third = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            started = await raw.post(first, headers=ACCEPT, json=INITIALIZE)
            assert started.status_code == 200, started.text
            sid = started.headers["mcp-session-id"]
            session = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
            initialized = await raw.post(first, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert initialized.status_code == 202, initialized.text
            texts = {url: f"{url}\n{LONG}" for url in (first, second)}
            cursors: dict[str, str] = {}

            async def page_one(url: str, n: int) -> None:
                call = {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"message": texts[url]}}}
                answer = await raw.post(url, headers=session, json=call)
                assert answer.status_code == 200, answer.text
                page = text_of_result(data_of(answer.text))
                found = NEXT.search(page[page.rfind(FOOTER):])
                assert found, page[-300:]
                cursors[url] = found.group(1)

            # Both answers are written by compare-and-set: the later one conflicts, merges and
            # writes again; each document is a member of its own, so both survive.
            async with anyio.create_task_group() as tg:
                for n, url in enumerate((first, second)):
                    tg.start_soon(page_one, url, n)
            for n, (url, cursor) in enumerate(cursors.items()):
                call = {"jsonrpc": "2.0", "id": 20 + n, "method": "tools/call",
                        "params": {"name": "read_page", "arguments": {"cursor": cursor}}}
                answer = await raw.post(third, headers=session, json=call)
                assert answer.status_code == 200, answer.text
                message = data_of(answer.text)
                assert not message["result"].get("isError"), (message, group.stderr())
                assert "[page 2 of" in text_of_result(message), message
        fields = redis_cli(group.redis, "HKEYS", f"mcpm:{{shared}}:session:{session_name(sid)}").split()
        assert len([f for f in fields if f.startswith("d:")]) == 2, fields


async def test_without_redis_new_and_stateless_sessions_fail_naming_the_store_and_recover(tmp_path: Path) -> None:
    with replicas(tmp_path, "gate") as group:
        stateless = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-stateless", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}}
        modern = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            listed = await raw.post(group.urls()[0], headers=modern, json=stateless)
            assert listed.status_code == 200 and "begin_session" in listed.text, listed.text
            group.redis.stop()
            for url in group.urls()[1:]:
                for headers, body in ((ACCEPT, INITIALIZE), (modern, stateless)):
                    refused = await raw.post(url, headers=headers, json=body)
                    assert refused.status_code == 503, refused.text
                    message = data_of(refused.text)["error"]["message"]
                    assert "session store" in message and group.redis.url in message, message
            group.redis.start()
            with anyio.fail_after(20):
                while True:
                    again = await raw.post(group.urls()[1], headers=ACCEPT, json=INITIALIZE)
                    if again.status_code == 200:
                        break
                    await anyio.sleep(0.2)
            listed = await raw.post(group.urls()[2], headers=modern, json=stateless)
            assert listed.status_code == 200 and "begin_session" in listed.text, listed.text


async def test_section_split_sections_read_through_other_replicas(tmp_path: Path) -> None:
    sets = ["section-split: { thresholdBytes: 2048, pageBytes: 2048 }"]
    with replicas(tmp_path, "section-split", sets=sets) as group:
        async with client(group.url) as c:
            result = await c.read_resource("demo://resource/static/document/structure.md")
            toc = result.contents[0].text
            assert toc.startswith("This Markdown document"), toc[:300]
            ids = [row.split()[0] for row in toc.split("\nid ", 1)[1].splitlines()[1:] if row.strip()]
            assert len(ids) >= 2, toc
            ids = ids * 2  # each read on more than one replica
            before = list(group.balancer.served)
            for section in ids:
                read = await c.call_tool("read_section", {"id": section})
                assert not read.is_error, (section, read, group.stderr())
                assert text_of(read.content[0]).strip(), section
            served = [after - b for after, b in zip(group.balancer.served, before)]
            assert all(n >= 1 for n in served), served
            keys = group.redis.keys("mcpm:{shared}:session:*")
            assert len(keys) == 1, keys
            fields = redis_cli(group.redis, "HKEYS", keys[0]).split()
            assert len([f for f in fields if f.startswith("d:")]) == 1, fields
