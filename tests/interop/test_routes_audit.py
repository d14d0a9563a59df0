"""Routes and the audit model through `mcpctl proxy PROJECT`, seen by the official
Python client in front of the reference server; then `mcpctl audit verify` on the log.

The project hides the reference server's `get-env` (it prints the server's environment) and
`trigger-*` tools, lets `echo` pass through, and audits every request.

Runs over stdio (`mcpctl proxy PROJECT`) when `MCP_PROXY` names the mcpctl binary, and over
streamable HTTP (`mcpctl serve PROJECT`) when `MCP_HTTP_PROXY` does; skipped without either.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

PROXY = os.environ.get("MCP_PROXY") or os.environ.get("MCP_HTTP_PROXY")
OVER_HTTP = not os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("neither MCP_PROXY nor MCP_HTTP_PROXY is set: this module runs mcpctl projects", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import BASE_TOOLS, READ_TIMEOUT, SERVER_JS, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

pytestmark = pytest.mark.anyio

KEY_VAR = "INTEROP_AUDIT_KEY"


def project_yaml(log: Path) -> str:
    return f"""
kind: Server
metadata: {{ name: everything }}
spec:
  command: node
  args: ["{SERVER_JS}", stdio]
---
kind: Project
metadata: {{ name: audited }}
spec:
  servers: [everything]
  proxyModel: audit
  config:
    audit: {{ path: "{log}", keyEnv: {KEY_VAR}, logArguments: true }}
  routes: {{ hidden: [get-env, "trigger-*"], passThrough: [echo] }}
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[dict[str, str], Path]:
    log = tmp_path / "audit.log"
    spec = tmp_path / "project.yaml"
    spec.write_text(project_yaml(log), encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home"), KEY_VAR: "interop audit key"}
    done = subprocess.run([PROXY, "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return env, log


@asynccontextmanager
async def project_client(env: dict[str, str], mode: str) -> AsyncIterator[Client]:
    """A client of the project: over stdio, or over HTTP through `mcpctl serve`, which is
    stopped (and so has written every record) when the client is done."""
    if not OVER_HTTP:
        params = StdioServerParameters(command=PROXY, args=["proxy", "audited"], env=env)
        transport = stdio_client(params)
        serving = None
    else:
        serving = ServedProcess([PROXY, "serve", "audited", "--listen", "127.0.0.1:0"], env,
                                failure="mcpctl serve did not start")
        assert serving.url is not None
        transport = streamable_http_client(serving.url)
    try:
        async with Client(
            transport,
            mode=mode,
            read_timeout_seconds=READ_TIMEOUT,
            client_info=types.Implementation(name="routes-audit-interop", version="1.0.0"),
            cache=None,
        ) as client:
            yield client
    finally:
        if serving is not None:
            serving.stop()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_hidden_tools_are_gone_and_every_call_is_audited(setup: tuple[dict[str, str], Path], mode: str) -> None:
    env, log = setup
    async with project_client(env, mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "get-env" not in names and not any(name.startswith("trigger-") for name in names)
        assert BASE_TOOLS - {"get-env", "trigger-long-running-operation"} <= names

        echoed = await client.call_tool("echo", {"message": "audited", "apiKey": "do-not-log"})
        assert text_of(echoed.content[0]) == "Echo: audited"

        with pytest.raises(MCPError) as refused:
            await client.call_tool("Get-Env", {})
        assert refused.value.code == -32602 and "hidden" in refused.value.message

    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    calls = [(r.get("target"), r["outcome"]) for r in records if r["method"] == "tools/call"]
    assert calls == [("echo", "ok"), ("Get-Env", "rejected")]
    assert records[0]["prev"] == "0" * 64
    echo = next(r for r in records if r.get("target") == "echo")
    assert echo["arguments"] == {"message": "audited", "apiKey": "[redacted]"}
    assert "do-not-log" not in log.read_text(encoding="utf-8")

    verified = subprocess.run(
        [PROXY, "audit", "verify", str(log), "--key-env", KEY_VAR], env=env, capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stderr
    assert f"{len(records)} record(s)" in verified.stdout

    lines = log.read_text(encoding="utf-8").splitlines()
    log.write_text("\n".join([lines[0], *lines[2:]]) + "\n", encoding="utf-8")
    tampered = subprocess.run(
        [PROXY, "audit", "verify", str(log), "--key-env", KEY_VAR], env=env, capture_output=True, text=True, timeout=60
    )
    assert tampered.returncode == 1
    assert "not intact at line 2" in tampered.stderr, tampered.stderr
