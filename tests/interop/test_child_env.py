"""What an upstream child's environment holds, read through the reference server's
`get-env` tool by the official Python client, through `mcpctl proxy PROJECT` and through
`mcpctl proxy -- CMD` (ad hoc).

A project's server gets the SDK default variables, its declared `env` (with `${env:VAR}`
resolved) and its `inheritEnv`; never a secret of the proxy's environment, and never the audit
key's variable. An ad-hoc command gets the proxy's whole environment except the audit key's
variable. Runs when `MCP_PROXY` names the mcpctl binary.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs mcpctl projects", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import READ_TIMEOUT, SERVER_JS, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.anyio

KEY_VAR = "INTEROP_CHILD_ENV_AUDIT_KEY"
KEY = "interop audit key, for the proxy only"
SECRET_VAR = "INTEROP_CHILD_ENV_SECRET"
SECRET = "a secret of the proxy's environment"
SDK_DEFAULT = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


def project_yaml(log: Path) -> str:
    return f"""
kind: Server
metadata: {{ name: everything }}
spec:
  command: node
  args: ["{SERVER_JS}", stdio]
  env: {{ DECLARED: plain, FROM_REF: "${{env:INTEROP_CHILD_ENV_SOURCE}}" }}
  inheritEnv: [INTEROP_CHILD_ENV_INHERITED]
---
kind: Project
metadata: {{ name: envp }}
spec:
  servers: [everything]
  proxyModel: audit
  config:
    audit: {{ path: "{log}", keyEnv: {KEY_VAR} }}
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    spec = tmp_path / "project.yaml"
    spec.write_text(project_yaml(tmp_path / "audit.log"), encoding="utf-8")
    env = {
        **os.environ,
        "MCPCTL_HOME": str(tmp_path / "home"),
        KEY_VAR: KEY,
        SECRET_VAR: SECRET,
        "INTEROP_CHILD_ENV_SOURCE": "resolved by the proxy",
        "INTEROP_CHILD_ENV_INHERITED": "inherited by name",
        "INTEROP_CHILD_ENV_ORDINARY": "ordinary",
    }
    done = subprocess.run([PROXY, "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return env


async def child_env(params: StdioServerParameters) -> dict[str, str]:
    async with Client(
        stdio_client(params),
        read_timeout_seconds=READ_TIMEOUT,
        client_info=types.Implementation(name="child-env-interop", version="1.0.0"),
        cache=None,
    ) as client:
        result = await client.call_tool("get-env", {})
        return json.loads(text_of(result.content[0]))


async def test_a_projects_server_gets_defaults_declared_env_and_inherit_env_only(env: dict[str, str]) -> None:
    got = await child_env(StdioServerParameters(command=PROXY, args=["proxy", "envp"], env=env))
    assert got["DECLARED"] == "plain"
    assert got["FROM_REF"] == "resolved by the proxy"
    assert got["INTEROP_CHILD_ENV_INHERITED"] == "inherited by name"
    assert got["PATH"] == os.environ["PATH"]
    assert set(got) <= SDK_DEFAULT | {"DECLARED", "FROM_REF", "INTEROP_CHILD_ENV_INHERITED"}, sorted(got)
    assert SECRET_VAR not in got and KEY_VAR not in got
    assert SECRET not in json.dumps(got) and KEY not in json.dumps(got)


async def test_an_ad_hoc_command_gets_the_environment_but_not_the_audit_key(env: dict[str, str], tmp_path: Path) -> None:
    args = [
        "proxy",
        "--model",
        "audit",
        "--set",
        f"audit.path={tmp_path / 'adhoc.log'}",
        "--set",
        f"audit.keyEnv={KEY_VAR}",
        "--",
        "node",
        str(SERVER_JS),
        "stdio",
    ]
    got = await child_env(StdioServerParameters(command=PROXY, args=args, env=env))
    assert got["INTEROP_CHILD_ENV_ORDINARY"] == "ordinary"
    assert got[SECRET_VAR] == SECRET
    assert KEY_VAR not in got and KEY not in json.dumps(got)
