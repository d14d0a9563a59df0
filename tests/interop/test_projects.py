"""A project through `mcpctl proxy PROJECT`, driven by the official Python client.

The project serves the reference server and a second upstream (the scripted stdio fixture)
as one surface, behind the `gate` model, with the project's prompts. Two clients connect at once:
each session gates on its own.

Needs `MCP_PROXY` (the mcpctl binary); without it the module is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs mcpctl projects", allow_module_level=True)

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import BASE_TOOLS, READ_TIMEOUT, SERVER_JS, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "tests" / "fixtures" / "scripted_upstream.py"

PROJECT_YAML = f"""
kind: Server
metadata: {{ name: everything }}
spec:
  command: node
  args: ["{SERVER_JS}", stdio]
---
kind: Server
metadata: {{ name: scripted }}
spec:
  command: {sys.executable}
  args: ["{SCRIPTED}"]
  env: {{ SCRIPTED_NAME: "${{env:INTEROP_SCRIPTED_NAME}}" }}
---
kind: Prompt
metadata: {{ name: echo-etiquette }}
spec:
  tags: [echo, testing]
  content: Always echo politely.
---
kind: Prompt
metadata: {{ name: unrelated }}
spec:
  tags: [cooking]
  content: Salt the pasta water.
---
kind: Project
metadata: {{ name: interop }}
spec:
  servers: [everything, scripted]
  prompts: [echo-etiquette, unrelated]
  proxyModel: gate
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    spec = tmp_path / "project.yaml"
    spec.write_text(PROJECT_YAML, encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home")}
    done = subprocess.run([PROXY, "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return tmp_path / "home"


def project_client(home: Path, mode: str, notes: list[str]) -> Client:
    env = {**os.environ, "MCPCTL_HOME": str(home), "INTEROP_SCRIPTED_NAME": "the-second-server"}
    params = StdioServerParameters(command=PROXY, args=["proxy", "interop"], env=env)

    async def on_message(message: object) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            notes.append(method)

    return Client(
        stdio_client(params),
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        message_handler=on_message,
        client_info=types.Implementation(name="projects-interop", version="1.0.0"),
        cache=None,
    )


def first_text(result: types.CallToolResult) -> str:
    return text_of(result.content[0])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_gated_project_of_two_servers_opens_per_session(home: Path, mode: str) -> None:
    first_notes: list[str] = []
    second_notes: list[str] = []
    async with project_client(home, mode, first_notes) as first, project_client(home, mode, second_notes) as second:
        gated = [tool.name for tool in (await first.list_tools()).tools]
        assert gated == ["begin_session"]

        refused = await first.call_tool("everything__echo", {"message": "hi"})
        assert refused.is_error and "begin_session" in first_text(refused)

        opened = await first.call_tool("begin_session", {"intent": "echo a message for testing", "tags": ["echo"]})
        text = first_text(opened)
        assert "Always echo politely." in text, text
        assert "unrelated" in text and "Salt the pasta" not in text, text
        with anyio.fail_after(10):
            while "notifications/tools/list_changed" not in first_notes:
                await anyio.sleep(0.05)

        tools = {tool.name for tool in (await first.list_tools()).tools}
        assert {f"everything__{name}" for name in BASE_TOOLS} <= tools
        assert {"scripted__t", "read_prompts"} <= tools and "begin_session" not in tools

        echoed = await first.call_tool("everything__echo", {"message": "through two servers"})
        assert first_text(echoed) == "Echo: through two servers"
        scripted = await first.call_tool("scripted__t", {})
        assert first_text(scripted) == "called t by the-second-server", "${env:VAR} resolved by the proxy"

        # The other session is still gated.
        assert [tool.name for tool in (await second.list_tools()).tools] == ["begin_session"]
        assert (await second.call_tool("everything__echo", {"message": "x"})).is_error


async def test_resources_and_prompts_route_back_to_their_server(home: Path) -> None:
    async with project_client(home, "legacy", []) as client:
        resources = (await client.list_resources()).resources
        assert resources, "the reference server's resources are listed"
        read = await client.read_resource(resources[0].uri)
        assert read.contents and str(read.contents[0].uri) == str(resources[0].uri)

        prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
        assert "everything__simple-prompt" in prompts, prompts
        got = await client.get_prompt("everything__simple-prompt")
        assert got.messages
