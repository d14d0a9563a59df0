"""Live changes: a running `mcpctl serve PROJECT` and `mcpctl proxy PROJECT` pick up
changes to the project and its servers while an official Python client session is open.

* over HTTP, by `POST /api/apply` and by `mcpctl apply`: a server added (the open session gets
  `notifications/tools/list_changed`, the new server's tool works), a tool hidden (refused in the
  open session as soon as the API answered), a server removed while a call to it is in flight
  (the call gets an error naming the change, the server's tools are gone), an invalid apply
  (400, the running configuration stays);
* on stdio, by editing the store's files: a server added, and a file that does not validate
  (refused and logged naming the file, the running configuration stays);
* per server: a reload that adds one server and removes another leaves the unchanged server and
  its call in flight alone, and a server whose env changed restarts alone.

Upstreams are the scripted stdio fixture (`tests/fixtures/scripted_upstream.py`), one process per
server, each answering tool calls with "called TOOL by NAME". Nothing sleeps: the tests wait on
notifications, on the proxy's log lines and on what the upstream recorded.

Needs `MCP_PROXY` (the mcpctl binary); without it the module is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs mcpctl projects", allow_module_level=True)

import anyio  # noqa: E402
import httpx2 as httpx  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import EVENT_TIMEOUT, READ_TIMEOUT, EventLog, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "tests" / "fixtures" / "scripted_upstream.py"
ADMIN_TOKEN = "live-admin-token-0123456789abcdef"
#: The proxy logs each reload at info under this target (mcpctl/src/live/mod.rs).
LOG_FILTER = "warn,mcpctl::live=info"


def server_doc(name: str, tools: str = "", log: Path | None = None) -> str:
    env = {"SCRIPTED_NAME": name, "SCRIPTED_TOOLS": tools}
    if log is not None:
        env["SCRIPTED_LOG"] = str(log)
    return (
        f"kind: Server\nmetadata: {{ name: {name} }}\nspec:\n  command: {sys.executable}\n"
        f"  args: [\"{SCRIPTED}\"]\n  env: {json.dumps(env)}\n"
    )


def project_doc(servers: list[str], hidden: list[str] = (), model: str = "passthrough") -> str:
    text = f"kind: Project\nmetadata: {{ name: live }}\nspec:\n  servers: [{', '.join(servers)}]\n  proxyModel: {model}\n"
    if hidden:
        text += f"  routes: {{ hidden: [{', '.join(hidden)}] }}\n"
    return text


class Lines:
    """A process's stderr lines, written by a reader thread and awaited by the test."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()

    def write(self, line: str) -> None:
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def flush(self) -> None:
        pass

    def mark(self) -> int:
        with self._cond:
            return len(self.lines)

    async def wait_for(self, pred: Callable[[str], bool], *, start: int = 0, what: str) -> str:
        def wait() -> str | None:
            with self._cond:
                found = self._cond.wait_for(
                    lambda: next((l for l in self.lines[start:] if pred(l)), None), timeout=EVENT_TIMEOUT
                )
                return found

        found = await anyio.to_thread.run_sync(wait)
        if found is None:
            pytest.fail(f"timed out waiting for {what}; stderr:\n{''.join(self.lines[-30:])}")
        return found


def mcpctl(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    return subprocess.run([PROXY, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60)


def apply(home: Path, *documents: str) -> None:
    done = mcpctl(home, "apply", "-f", "-", stdin="\n---\n".join(documents))
    assert done.returncode == 0, done.stderr


def notifications_log() -> tuple[EventLog[str], Callable[[object], object]]:
    log: EventLog[str] = EventLog("notifications")

    async def on_message(message: object) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            log.append(method)

    return log, on_message


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def call_text(client: Client, name: str) -> str:
    result = await client.call_tool(name, {})
    assert result.is_error is not True, result
    return text_of(result.content[0])


async def wait_recorded(log: Path, method: str) -> None:
    """Waits until the scripted upstream recorded a `method` request (it writes one JSON line per
    message it receives)."""
    with anyio.fail_after(EVENT_TIMEOUT):
        while not (log.exists() and any(json.loads(l).get("method") == method for l in log.read_text().splitlines())):
            await anyio.sleep(0.02)


@asynccontextmanager
async def serving(home: Path) -> AsyncIterator[tuple[str, str, Lines]]:
    """`mcpctl serve live` with the admin listener: (MCP URL, admin URL, stderr)."""
    tokens = home / "admin-tokens"
    tokens.write_text(f"ops {ADMIN_TOKEN}\n")
    lines = Lines()
    served = ServedProcess(
        [PROXY, "serve", "live", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
         "--admin-tokens", str(tokens)],
        {**os.environ, "MCPCTL_HOME": str(home), "MCPCTL_LOG": LOG_FILTER},
        lines,
        ready="admin listening on ",
    )
    try:
        assert served.url is not None
        admin = next(l for l in lines.lines if l.startswith("admin listening on ")).split()[-1].rstrip("/")
        yield served.url, admin, lines
    finally:
        served.stop()


async def test_serve_follows_api_and_cli_changes_in_an_open_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    beta_log = tmp_path / "beta.jsonl"
    apply(home, server_doc("alpha", "secret"), server_doc("beta", "hang", beta_log), project_doc(["alpha", "beta"]))
    async with serving(home) as (url, admin, stderr):
        notes, on_message = notifications_log()
        client = Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                        message_handler=on_message, cache=None,
                        client_info=types.Implementation(name="live-changes", version="1.0.0"))
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with client, httpx.AsyncClient(base_url=admin, headers=headers, timeout=READ_TIMEOUT) as api:

            async def post_apply(*documents: str) -> httpx.Response:
                return await api.post("/api/apply", content="\n---\n".join(documents),
                                      headers={"Content-Type": "application/yaml"})

            assert await tool_names(client) == {"alpha__t", "alpha__secret", "beta__t", "beta__hang"}

            # A server added by the API: the open session hears of it, and its tool works.
            start = notes.mark()
            answer = await post_apply(server_doc("gamma"), project_doc(["alpha", "beta", "gamma"]))
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert {"kind": "Server", "name": "gamma", "action": "created"} in body["results"]
            assert body["reload"]["state"] == "reloaded" and body["reload"]["serversAdded"] == ["gamma"], body
            await notes.wait_for(lambda m: m == "notifications/tools/list_changed", start=start,
                                 what="tools/list_changed after adding gamma")
            assert "gamma__t" in await tool_names(client)
            assert await call_text(client, "gamma__t") == "called t by gamma"

            # A tool hidden by the API is refused in the open session as soon as the API answered,
            # before the client has even listed again.
            answer = await post_apply(project_doc(["alpha", "beta", "gamma"], hidden=["alpha__secret"]))
            assert answer.status_code == 200, answer.text
            with pytest.raises(MCPError, match="hidden"):
                await client.call_tool("alpha__secret", {})
            assert "alpha__secret" not in await tool_names(client)

            # A server removed while a call to it is in flight: the call gets an error naming the
            # change, the server's tools are gone, and the admin API says it stopped.
            outcome: dict[str, object] = {}

            async def hang() -> None:
                try:
                    outcome["result"] = await client.call_tool("beta__hang", {})
                except MCPError as err:
                    outcome["error"] = err.error.message

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(hang)
                await wait_recorded(beta_log, "tools/call")
                start = notes.mark()
                answer = await post_apply(project_doc(["alpha", "gamma"], hidden=["alpha__secret"]))
                assert answer.status_code == 200, answer.text
                assert answer.json()["reload"]["serversRemoved"] == ["beta"], answer.text
            assert "configuration changed" in str(outcome.get("error")), outcome
            await notes.wait_for(lambda m: m == "notifications/tools/list_changed", start=start,
                                 what="tools/list_changed after removing beta")
            assert await tool_names(client) == {"alpha__t", "gamma__t"}
            with pytest.raises(MCPError, match="unknown tool `beta__t`"):
                await client.call_tool("beta__t", {})
            servers = {s["name"]: s["status"] for s in (await api.get("/api/servers")).json()["servers"]}
            assert servers == {"alpha": "running", "gamma": "running", "beta": "stopped"}, servers

            # An invalid apply is refused with its errors, and the running configuration stays.
            answer = await post_apply(project_doc(["alpha", "gamma"], model="no-such-model"))
            assert answer.status_code == 400, answer.text
            assert answer.json()["errors"], answer.text
            assert await tool_names(client) == {"alpha__t", "gamma__t"}
            assert await call_text(client, "gamma__t") == "called t by gamma"

            # `mcpctl apply` from another process: the store watch reloads, the session follows.
            start, logged = notes.mark(), stderr.mark()
            apply(home, project_doc(["alpha", "beta", "gamma"]))
            await stderr.wait_for(lambda l: "live reload (changed:" in l and "servers added: `beta`" in l,
                                  start=logged, what="the reload of `mcpctl apply`")
            await notes.wait_for(lambda m: m == "notifications/tools/list_changed", start=start,
                                 what="tools/list_changed after mcpctl apply")
            everything = {"alpha__t", "alpha__secret", "beta__t", "beta__hang", "gamma__t"}
            assert await tool_names(client) == everything
            assert await call_text(client, "beta__t") == "called t by beta"

            # A session started now runs the new configuration from its first request.
            fresh = Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                           cache=None, client_info=types.Implementation(name="live-fresh", version="1.0.0"))
            async with fresh:
                assert await tool_names(fresh) == everything
                assert await call_text(fresh, "gamma__t") == "called t by gamma"


async def test_proxy_follows_edits_of_the_store_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    apply(home, server_doc("alpha", "secret"), server_doc("beta"), project_doc(["alpha"]))
    stderr = Lines()
    read_end, write_end = os.pipe()

    def pump() -> None:
        with os.fdopen(read_end, encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                stderr.write(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    errlog = os.fdopen(write_end, "w")
    notes, on_message = notifications_log()
    params = StdioServerParameters(command=PROXY, args=["proxy", "live"],
                                   env={**os.environ, "MCPCTL_HOME": str(home), "MCPCTL_LOG": LOG_FILTER})
    project_file = home / "projects" / "live.yaml"

    def edit(text: str) -> None:
        # As an editor saves: a new file renamed over the old one.
        scratch = project_file.with_name("live.yaml.new")
        scratch.write_text(text, encoding="utf-8")
        scratch.replace(project_file)

    try:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                          message_handler=on_message, cache=None,
                          client_info=types.Implementation(name="live-edits", version="1.0.0")) as client:
            await stderr.wait_for(lambda l: "watching the store for changes" in l, what="the store watch")
            # One server is served as it is: its tools are not prefixed.
            assert await tool_names(client) == {"t", "secret"}

            # An edit of the project's file adds a server: the session gets list_changed and now
            # reaches both, named by server.
            start = notes.mark()
            edit(project_doc(["alpha", "beta"]))
            await notes.wait_for(lambda m: m == "notifications/tools/list_changed", start=start,
                                 what="tools/list_changed after the edit")
            assert await tool_names(client) == {"alpha__t", "alpha__secret", "beta__t"}
            assert await call_text(client, "beta__t") == "called t by beta"

            # A file that does not validate is refused, logged naming the file, and the running
            # configuration stays.
            logged = stderr.mark()
            edit("kind: Project\nmetadata: { name: live }\nspec:\n  servers: [alpha, beta]\n  proxyModell: gate\n")
            refused = await stderr.wait_for(lambda l: "refused, the running configuration stays" in l,
                                            start=logged, what="the refused reload")
            assert "live.yaml" in refused and "proxyModell" in refused, refused
            assert await tool_names(client) == {"alpha__t", "alpha__secret", "beta__t"}
            assert await call_text(client, "alpha__t") == "called t by alpha"
    finally:
        errlog.close()
        reader.join(10)


def recorded(log: Path, method: str) -> int:
    """How many `method` messages the scripted upstream behind `log` received."""
    return sum(1 for l in log.read_text().splitlines() if json.loads(l).get("method") == method)


async def test_a_reload_changes_only_the_servers_that_differ(tmp_path: Path) -> None:
    """A call in flight to a server the change leaves alone completes across a reload that adds
    one server and removes another; the unchanged server is not restarted (it was initialized
    once), the removed one's call gets the error naming the change, the added one works; a server
    whose env changes restarts alone, its handshake replayed."""
    home = tmp_path / "home"
    alpha_log, beta_log = tmp_path / "alpha.jsonl", tmp_path / "beta.jsonl"
    apply(home, server_doc("alpha", "needs_sampling", alpha_log), server_doc("beta", "hang", beta_log),
          project_doc(["alpha", "beta"]))
    asked, release = anyio.Event(), anyio.Event()

    async def sampler(ctx: object, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        # Holds alpha's call open until the reload is done.
        asked.set()
        await release.wait()
        return types.CreateMessageResult(role="assistant", model="live",
                                         content=types.TextContent(type="text", text="four"))

    async with serving(home) as (url, admin, _stderr):
        notes, on_message = notifications_log()
        client = Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                        message_handler=on_message, sampling_callback=sampler, cache=None,
                        client_info=types.Implementation(name="live-per-server", version="1.0.0"))
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with client, httpx.AsyncClient(base_url=admin, headers=headers, timeout=READ_TIMEOUT) as api:
            assert await tool_names(client) == {"alpha__t", "alpha__needs_sampling", "beta__t", "beta__hang"}
            outcome: dict[str, object] = {}

            async def call(name: str) -> None:
                try:
                    outcome[name] = await client.call_tool(name, {})
                except MCPError as err:
                    outcome[name] = err.error.message

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, "alpha__needs_sampling")
                tasks.start_soon(call, "beta__hang")
                with anyio.fail_after(EVENT_TIMEOUT):
                    await asked.wait()
                await wait_recorded(beta_log, "tools/call")
                start = notes.mark()
                answer = await api.post("/api/apply", content="\n---\n".join([server_doc("gamma"), project_doc(["alpha", "gamma"])]),
                                        headers={"Content-Type": "application/yaml"})
                assert answer.status_code == 200, answer.text
                reload = answer.json()["reload"]
                assert reload["serversAdded"] == ["gamma"] and reload["serversRemoved"] == ["beta"], reload
                await notes.wait_for(lambda m: m == "notifications/tools/list_changed", start=start,
                                     what="tools/list_changed after the reload")
                assert await tool_names(client) == {"alpha__t", "alpha__needs_sampling", "gamma__t"}
                assert await call_text(client, "gamma__t") == "called t by gamma"
                # Only now does alpha's call get its answer: it was in flight through the reload.
                release.set()

            assert "configuration changed" in str(outcome["beta__hang"]), outcome
            result = outcome["alpha__needs_sampling"]
            assert isinstance(result, types.CallToolResult) and result.is_error is not True, outcome
            assert text_of(result.content[0]) == "sampled"
            # alpha ran on: one process, initialized once, never stopped by the change.
            assert recorded(alpha_log, "initialize") == 1
            assert await call_text(client, "alpha__t") == "called t by alpha"

            # A server whose env changed restarts with the session's handshake; alpha stays.
            gamma_log = tmp_path / "gamma.jsonl"
            start = notes.mark()
            answer = await api.post("/api/apply", content=server_doc("gamma", "extra", gamma_log),
                                    headers={"Content-Type": "application/yaml"})
            assert answer.status_code == 200, answer.text
            await notes.wait_for(lambda m: m == "notifications/tools/list_changed", start=start,
                                 what="tools/list_changed after changing gamma")
            assert await tool_names(client) == {"alpha__t", "alpha__needs_sampling", "gamma__t", "gamma__extra"}
            assert await call_text(client, "gamma__extra") == "called extra by gamma"
            assert recorded(gamma_log, "initialize") == 1
            assert recorded(gamma_log, "notifications/initialized") == 1
            assert recorded(alpha_log, "initialize") == 1
