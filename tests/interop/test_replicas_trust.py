"""A shared store that cannot be used to take over the replicas: `mcpctl serve PROJECT --store
redis://... --state-key-file FILE` on three replicas, attacked through Redis itself with
`redis-cli`, as someone with access to Redis (and without the replicas' key) would.

- A configuration generation written into `mcpm:{project}:config` and announced is refused by
  every replica (logged, naming the key): the injected command never runs and the hidden tool
  stays hidden.
- A session whose principal was changed in its record is refused: the other principal cannot
  use it on any replica.
- No Redis key or channel names a live session id (only its keyed digest).
- `--store` without `--state-key-file` refuses to start.

Runs when `MCP_HTTP_PROXY` names the mcpctl binary (skipped for the direct pass only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HTTP = os.environ.get("MCP_HTTP_PROXY")
if not HTTP:
    pytest.skip("MCP_HTTP_PROXY is not set: replicas are mcpctl serve processes", allow_module_level=True)

import httpx2  # noqa: E402
from conftest import READ_TIMEOUT  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_replicas import ACCEPT, replicas, session_name  # noqa: E402
from test_replicas_fleet import (  # noqa: E402
    ADMIN_TOKEN,
    client,
    fleet,
    on_every_replica,
    project_doc,
    redis_cli,
)

pytestmark = pytest.mark.anyio

CONFIG = "mcpm:{fleet}:config"


def hget(port: int, key: str, field: str) -> str:
    done = subprocess.run(["redis-cli", "-p", str(port), "--raw", "HGET", key, field],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout.rstrip("\n")


async def test_a_forged_configuration_is_refused_and_every_replica_keeps_its_own(tmp_path: Path) -> None:
    injected = tmp_path / "injected"
    with fleet(tmp_path) as group:
        async with client(group.url) as (c, _heard):
            await on_every_replica(c, group)
            a = group.replicas[0]
            marks = [r.stderr.mark() for r in group.replicas]
            # The operator hides `secret` through one replica: a generation every replica takes.
            async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as api:
                answer = await api.post(f"{a.admin}/api/apply", content=project_doc(hidden=["secret"]),
                                        headers={"Authorization": f"Bearer {ADMIN_TOKEN}",
                                                 "Content-Type": "application/yaml"})
            assert answer.status_code == 200, answer.text
            for replica, mark in zip(group.replicas[1:], marks[1:]):
                await replica.stderr.wait_for(
                    lambda line: "of the shared configuration): generation" in line and "routes" in line,
                    start=mark, what="the operator's generation taken by another replica")
            generation = int(hget(group.redis.port, CONFIG, "generation"))
            # The attack: the server's command replaced, the route emptied, announced.
            evil_server = (f"kind: Server\nmetadata: {{ name: up }}\nspec:\n  command: /bin/sh\n"
                           f"  args: [\"-c\", \"touch {injected}\"]\n")
            documents = {"projects/fleet.yaml": project_doc(), "servers/up.yaml": evil_server}
            forged = json.dumps(documents, sort_keys=True)
            # Plain JSON (no record), then a real record of the operator's with its text changed.
            genuine = hget(group.redis.port, CONFIG, "documents")
            tampered = genuine.replace("secret", "nothing")  # the hidden route, unhidden
            assert tampered != genuine, genuine[:200]
            for n, value in enumerate([forged, tampered], start=1):
                marks = [r.stderr.mark() for r in group.replicas]
                number = str(generation + n)
                redis_cli(group.redis, "HSET", CONFIG, "generation", number, "documents", value)
                redis_cli(group.redis, "PUBLISH", "mcpm:{fleet}:config-changed", number)
                for replica, mark in zip(group.replicas, marks):
                    refusal = await replica.stderr.wait_for(
                        lambda line: "shared configuration was refused" in line,
                        start=mark, what="the replica refusing the forged generation")
                    assert CONFIG in refusal, refusal
            # Every replica still runs the operator's configuration: `secret` stays hidden, the
            # upstream is the one it was, and the injected command never ran.
            for _ in range(3):
                assert "secret" not in {t.name for t in (await c.list_tools()).tools}
                with pytest.raises(MCPError):
                    await c.call_tool("secret", {})
            for replica in group.replicas:
                assert "/bin/sh" not in (replica.home / "servers" / "up.yaml").read_text()
                assert "secret" in (replica.home / "projects" / "fleet.yaml").read_text()
            assert not injected.exists(), "the injected command ran"


async def test_a_session_given_to_another_principal_in_redis_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789abcdef\nbob bob-token-0123456789abcdef0\n")
    with replicas(tmp_path, "gate", flags=["--tokens", str(tokens)]) as group:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        alice = {**ACCEPT, "authorization": "Bearer alice-token-0123456789abcdef"}
        bob = {**ACCEPT, "authorization": "Bearer bob-token-0123456789abcdef0"}
        first, second, third = group.urls()
        async with httpx2.AsyncClient(timeout=READ_TIMEOUT) as raw:
            started = await raw.post(first, headers=alice, json=initialize)
            assert started.status_code == 200, started.text
            sid = started.headers["mcp-session-id"]
            session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            mine = await raw.post(first, headers={**alice, **session}, json=listing)
            assert mine.status_code == 200, mine.text
            # No key holds the session id: only its keyed digest names it.
            keys = group.redis.keys("*")
            assert keys and not [k for k in keys if sid in k], keys
            for key in group.redis.keys("mcpm:{shared}:quota:*"):
                members = redis_cli_out(group.redis.port, "ZRANGE", key, "0", "-1")
                assert sid not in members, members
            channels = redis_cli_out(group.redis.port, "PUBSUB", "CHANNELS", "*")
            assert sid not in channels, channels
            key = f"mcpm:{{shared}}:session:{session_name(sid)}"
            assert key in keys, keys
            # The attack: the record's principal changed to bob's.
            meta = hget(group.redis.port, key, "meta")
            assert "alice" in meta, meta
            subprocess.run(["redis-cli", "-p", str(group.redis.port), "HSET", key, "meta",
                            meta.replace("alice", "bob")], check=True, capture_output=True, timeout=10)
            # Bob cannot use it on the replicas that would restore it from the store.
            for url in (second, third):
                theirs = await raw.post(url, headers={**bob, **session}, json=listing)
                assert theirs.status_code == 404, theirs.text
            assert "a session record in the shared store was refused" in group.stderr(), group.stderr()


def redis_cli_out(port: int, *args: str) -> str:
    done = subprocess.run(["redis-cli", "-p", str(port), "--raw", *args], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_store_without_a_key_file_refuses_to_start(tmp_path: Path) -> None:
    done = subprocess.run([HTTP or "", "serve", "--listen", "127.0.0.1:0", "--store", "redis://127.0.0.1:1/0",
                           "--", "true"], env={**os.environ, "MCPCTL_HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--store needs --state-key-file" in done.stderr, done.stderr
