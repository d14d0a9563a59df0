"""Per-caller restrictions (`routes.restricted`) with the official Python client: `mcpctl serve
PROJECT` in front of the reference server, two callers at once with bearer tokens from a token
file (`token:alice`, `token:bob`). Alice sees and calls `get-env`; bob does not see it, and his
call is refused as a hidden tool's (-32602) and audited as `rejected`.

Runs when `MCP_HTTP_PROXY` (or `MCP_PROXY`) names the mcpctl binary.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

PROXY = os.environ.get("MCP_HTTP_PROXY") or os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("neither MCP_HTTP_PROXY nor MCP_PROXY is set: this module runs mcpctl serve", allow_module_level=True)

import httpx2 as httpx  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from conftest import EVENT_TIMEOUT, READ_TIMEOUT, SERVER_JS  # noqa: E402

pytestmark = pytest.mark.anyio

KEY_VAR = "INTEROP_AUDIT_KEY"
ALICE = "token-of-alice-0123456789"
BOB = "token-of-bob-0123456789"


class Served:
    """`mcpctl serve PROJECT --tokens FILE` as a child process: its URL; stderr to `errlog`."""

    def __init__(self, project: str, tokens: Path, env: dict[str, str], errlog: Any) -> None:
        self.proc = subprocess.Popen(
            [PROXY or "", "serve", project, "--listen", "127.0.0.1:0", "--tokens", str(tokens)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.url: str | None = None
        found = threading.Event()

        def pump() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                if self.url is None and line.startswith("listening on "):
                    self.url = line.removeprefix("listening on ").strip()
                    found.set()
                errlog.write(line)
                errlog.flush()
            found.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        if not found.wait(EVENT_TIMEOUT) or self.url is None:
            self.stop()
            pytest.fail(f"mcpctl serve did not print `listening on URL` (exit status {self.proc.poll()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._pump.join(5)


async def test_two_callers_at_once_see_and_reach_what_they_may(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n", encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home"), KEY_VAR: "interop audit key"}
    spec = f"""kind: Server
metadata: {{ name: everything }}
spec:
  command: node
  args: ["{SERVER_JS}", stdio]
---
kind: Project
metadata: {{ name: restricted }}
spec:
  servers: [everything]
  proxyModel: audit
  config:
    audit: {{ path: "{log}", keyEnv: {KEY_VAR} }}
  routes:
    restricted:
      - names: [get-env]
        principals: ["token:alice"]
"""
    subprocess.run([PROXY or "", "apply", "-f", "-"], input=spec, text=True, env=env, check=True)
    with open(tmp_path / "serve.err", "w", encoding="utf-8") as errlog:
        served = Served("restricted", tokens, env, errlog)
        try:
            assert served.url is not None

            def client(token: str) -> Client:
                http = httpx.AsyncClient(headers={"authorization": f"Bearer {token}"})
                transport = streamable_http_client(served.url or "", http_client=http)
                return Client(transport, mode="legacy", read_timeout_seconds=READ_TIMEOUT, cache=None)

            async with client(ALICE) as alice, client(BOB) as bob:
                alice_tools = [t.name for t in (await alice.list_tools()).tools]
                bob_tools = [t.name for t in (await bob.list_tools()).tools]
                assert "get-env" in alice_tools
                assert "get-env" not in bob_tools and "echo" in bob_tools
                assert set(alice_tools) - set(bob_tools) == {"get-env"}
                done = await alice.call_tool("get-env", {})
                assert not done.is_error
                for name in ("get-env", "GET-ENV", " get-env\n"):
                    with pytest.raises(Exception) as refused:
                        await bob.call_tool(name, {})
                    assert "hidden by this proxy's routes" in str(refused.value), refused.value
                echoed = await bob.call_tool("echo", {"message": "hi"})
                assert not echoed.is_error
        finally:
            served.stop()
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    calls = [(r["principal"], r["target"], r["outcome"]) for r in records if r["method"] == "tools/call"]
    assert ("token:alice", "get-env", "ok") in calls, calls
    assert [c for c in calls if c[0] == "token:bob" and c[2] == "rejected"] == [
        ("token:bob", name, "rejected") for name in ("get-env", "GET-ENV", " get-env\n")
    ], calls
