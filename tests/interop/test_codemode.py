"""Code mode: the `codemode` model through `mcpctl`, driven by the official Python client.

An ad-hoc proxy of the reference server (`mcpctl proxy --model codemode -- node SERVER stdio`,
namespace `upstream`), a project of two servers (the reference server and the scripted fixture,
one of the reference server's tools hidden by the project's routes, plus a server that cannot
start), and the same over streamable HTTP (`mcpctl serve`). Every test checks what the client
gets: the four tools, `overview`, `search_tools`, `inspect`, and `execute` with its inner calls,
logs, errors and limits; after each failure the session keeps working. Over HTTP, several
sessions of one process share its limit on executes running at once; in a project's session, a
tool hidden by a live change (`mcpctl apply`) leaves code mode at once.

Needs `MCP_PROXY` (the mcpctl binary, built with the `codemode` feature, its default); without
it the module is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs mcpctl with the codemode model", allow_module_level=True)

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import BASE_TOOLS, EVENT_TIMEOUT, READ_TIMEOUT, SERVER_JS, EventLog, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "tests" / "fixtures" / "scripted_upstream.py"
FOUR = ["overview", "search_tools", "inspect", "execute"]
#: Small limits so the limit tests end quickly; the defaults are documented in the guide (docs/src/codemode.md).
LIMITS = [
    *("--set", "codemode.timeoutMs=3000", "--set", "codemode.memoryBytes=16777216"),
    *("--set", "codemode.maxToolCalls=5", "--set", "codemode.typeChecker=off"),
]
#: A TypeScript checker (`tsc` of the npm package `typescript@7`, or `tsgo`) for the type-check
#: test; without one that test is skipped (type checking is optional: nothing else needs it).
TYPE_CHECKER = os.environ.get("CODEMODE_TYPE_CHECKER")


def adhoc_client(*extra: str) -> Client:
    params = StdioServerParameters(
        command=PROXY or "",
        args=["proxy", "--model", "codemode", *LIMITS, *extra, "--", "node", str(SERVER_JS), "stdio"],
        env=dict(os.environ),
    )
    return Client(stdio_client(params), mode="legacy", read_timeout_seconds=READ_TIMEOUT, cache=None)


@pytest.fixture
async def adhoc() -> AsyncIterator[Client]:
    async with adhoc_client() as client:
        yield client


async def execute(client: Client, code: str, **extra: Any) -> types.CallToolResult:
    return await client.call_tool("execute", {"code": code, **extra})


def result_of(done: types.CallToolResult) -> Any:
    assert not done.is_error, text_of(done.content[0])
    return json.loads(text_of(done.content[0]))


def error_of(done: types.CallToolResult) -> str:
    assert done.is_error, f"expected an error, got {done.content!r}"
    return text_of(done.content[0])


# --------------------------------------------------------------------------- ad hoc, stdio


async def test_lists_exactly_the_four_tools(adhoc: Client) -> None:
    tools = (await adhoc.list_tools()).tools
    assert [tool.name for tool in tools] == FOUR
    refused = await adhoc.call_tool("echo", {"message": "direct"})
    assert refused.is_error and "execute" in text_of(refused.content[0])


async def test_overview_names_the_upstream_namespace(adhoc: Client) -> None:
    done = await adhoc.call_tool("overview", {})
    assert not done.is_error
    text = text_of(done.content[0])
    assert "upstream" in text and "Type checking: not available" in text, text
    data = done.structured_content
    assert data is not None
    [namespace] = data["namespaces"]
    assert namespace["namespace"] == "upstream" and namespace["status"] == "ok"
    assert namespace["toolCount"] >= len(BASE_TOOLS)
    assert data["typeChecking"]["available"] is False
    assert data["limits"]["timeoutMs"] == 3000 and data["limits"]["maxToolCalls"] == 5


async def test_search_ranks_by_names_and_descriptions(adhoc: Client) -> None:
    done = await adhoc.call_tool("search_tools", {"query": "echo"})
    data = done.structured_content
    assert data is not None and data["results"][0]["name"] == "upstream.echo"
    assert "upstream.echo(args: { message: string }): string" in text_of(done.content[0])

    summed = await adhoc.call_tool("search_tools", {"query": "sum of two numbers", "limit": 3})
    data = summed.structured_content
    assert data is not None and len(data["results"]) <= 3
    assert data["results"][0]["tool"] == "get-sum", data["results"]
    assert data["results"][0]["signature"].startswith("upstream.getSum(args: { a: number; b: number })")


async def test_inspect_declares_types_from_the_schemas(adhoc: Client) -> None:
    done = await adhoc.call_tool("inspect", {"names": ["upstream.getSum", 'upstream["get-structured-content"]', "upstream.nope"]})
    assert not done.is_error
    text = text_of(done.content[0])
    assert "declare namespace upstream {" in text
    assert "function getSum(args: {" in text and "a: number;" in text and "b: number;" in text, text
    assert 'upstream["get-sum"]' in text, "the original name is shown"
    data = done.structured_content
    assert data is not None
    assert [tool["tool"] for tool in data["tools"]] == ["get-sum", "get-structured-content"]
    structured = data["tools"][1]["declaration"]
    assert "Promise<string>" not in structured, "the result type comes from the outputSchema"
    assert data["unknown"][0]["name"] == "upstream.nope"


async def test_execute_calls_tools_by_method_and_by_index(adhoc: Client) -> None:
    code = """
        const echoed: string = await upstream.echo({ message: "hi" });
        const sum = await upstream["get-sum"]({ a: 20, b: 22 });
        console.log("sum is", sum);
        console.warn({ warned: true });
        return { echoed, sum };
    """
    done = await execute(adhoc, code)
    value = result_of(done)
    assert value["echoed"] == "Echo: hi"
    assert "42" in json.dumps(value["sum"])
    logs = text_of(done.content[1])
    assert "[log] sum is" in logs and '[warn] {"warned":true}' in logs
    assert done.structured_content is not None
    assert done.structured_content["result"] == value
    assert [log["level"] for log in done.structured_content["logs"]] == ["log", "warn"]


async def test_execute_runs_calls_together_and_returns_null_for_undefined(adhoc: Client) -> None:
    code = "const all = await Promise.all([1, 2, 3].map((n) => upstream.echo({ message: `m${n}` }))); return all;"
    assert result_of(await execute(adhoc, code)) == ["Echo: m1", "Echo: m2", "Echo: m3"]
    undefined = await execute(adhoc, "const x = 1;")
    assert text_of(undefined.content[0]) == "null" and len(undefined.content) == 1


async def test_nothing_persists_and_nothing_of_the_host_is_reachable(adhoc: Client) -> None:
    assert result_of(await execute(adhoc, "globalThis.kept = 1; return 1;")) == 1
    assert result_of(await execute(adhoc, "return typeof globalThis.kept;")) == "undefined"
    code = "return [typeof fetch, typeof require, typeof process, typeof Deno, typeof XMLHttpRequest, typeof setTimeout];"
    assert result_of(await execute(adhoc, code)) == ["undefined"] * 6


async def test_errors_say_what_and_where(adhoc: Client) -> None:
    thrown = error_of(await execute(adhoc, "const a = 1;\nconst b: number = 2;\n  throw new Error('boom');"))
    assert thrown.startswith("Error at line 3, column"), thrown
    assert "boom" in thrown

    syntax = error_of(await execute(adhoc, "const x = ;"))
    assert "SyntaxError at line 1, column" in syntax, syntax

    missing = error_of(await execute(adhoc, "return await upstream.ech({ message: 'x' });"))
    assert "upstream.ech" in missing and "did you mean" in missing and "upstream.echo(args: { message: string })" in missing, missing

    namespace = error_of(await execute(adhoc, "return await upstrem.echo({ message: 'x' });"))
    assert "`upstrem` is not a namespace" in namespace and "upstream" in namespace, namespace

    tool_error = error_of(await execute(adhoc, "\nawait upstream.echo({ message: 5 });"))
    assert "message" in tool_error and "nothing was sent" in tool_error, tool_error
    assert "line 2" in tool_error, tool_error

    caught = await execute(adhoc, "try { await upstream.getSum({ a: 'x', b: 1 }); } catch (e) { return String(e.message); }")
    assert "`a`" in result_of(caught)

    assert result_of(await execute(adhoc, "return 'still working';")) == "still working"


async def test_limits_stop_runaway_snippets_and_the_session_goes_on(adhoc: Client) -> None:
    loop = error_of(await execute(adhoc, "while (true) {}"))
    assert "Timeout" in loop and "3000 ms" in loop, loop

    bomb = error_of(await execute(adhoc, "const a: string[] = []; while (true) { a.push('x'.repeat(1 << 16)); }"))
    assert "OutOfMemory" in bomb or "memory" in bomb, bomb

    recursion = error_of(await execute(adhoc, "function f(n: number): number { return f(n + 1) + 1; }\nreturn f(0);"))
    assert "RangeError" in recursion or "stack" in recursion.lower(), recursion

    calls = await execute(adhoc, "for (let i = 0; i < 6; i++) { await upstream.echo({ message: String(i) }); }")
    assert "maxToolCalls (5)" in error_of(calls)

    big = await execute(adhoc, "return 'y'.repeat(100000);")
    assert "output truncated" in text_of(big.content[0])

    stalled = error_of(await execute(adhoc, "await new Promise(() => {});"))
    assert "Stalled" in stalled

    assert result_of(await execute(adhoc, "return await upstream.echo({ message: 'after' });")) == "Echo: after"


async def test_dry_run_checks_without_running(adhoc: Client) -> None:
    done = await execute(adhoc, "await upstream.echo({ message: 'x' }); while (true) {}", dryRun=True)
    assert not done.is_error and "nothing ran" in text_of(done.content[0])
    assert "upstream.nope" in error_of(await execute(adhoc, "await upstream.nope({});", dryRun=True))


async def test_progress_of_an_inner_call_is_relayed_as_progress_of_execute(adhoc: Client) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    code = "return await upstream.triggerLongRunningOperation({ duration: 1, steps: 3 });"
    done = await adhoc.call_tool("execute", {"code": code}, progress_callback=on_progress)
    assert not done.is_error, text_of(done.content[0])
    assert seen, "the upstream's progress reached the client"


async def test_cancelling_execute_cancels_its_inner_call_and_the_session_goes_on(adhoc: Client) -> None:
    code = "return await upstream.triggerLongRunningOperation({ duration: 30, steps: 3 });"
    with anyio.move_on_after(1.5):
        await execute(adhoc, code)
    # The cancelled execute is gone; the next one is answered at once.
    with anyio.fail_after(EVENT_TIMEOUT):
        assert result_of(await execute(adhoc, "return 7;")) == 7


@pytest.mark.skipif(not TYPE_CHECKER, reason="CODEMODE_TYPE_CHECKER names no TypeScript checker")
async def test_type_errors_come_back_as_diagnostics_and_nothing_runs() -> None:
    async with adhoc_client("--set", f"codemode.typeChecker={TYPE_CHECKER}") as client:
        overview = await client.call_tool("overview", {})
        assert overview.structured_content is not None
        assert overview.structured_content["typeChecking"]["available"] is True

        wrong = await execute(client, "console.log('ran');\nconst n: number = await upstream.echo({ message: 'x' });\nreturn n;")
        text = error_of(wrong)
        assert "does not type-check (nothing ran)" in text and "line 2, column" in text, text
        assert len(wrong.content) == 1, "nothing ran, so nothing was logged"
        assert wrong.structured_content is not None and wrong.structured_content["diagnostics"][0]["line"] == 2

        argument = error_of(await execute(client, "return await upstream.echo({ message: 1 });"))
        assert "line 1" in argument and "TS" in argument, argument

        right = "const s: string = await upstream['get-sum']({ a: 1, b: 2 });\nconst e = await upstream.echo({ message: s });\nreturn e;"
        assert result_of(await execute(client, right)) == "Echo: The sum of 1 and 2 is 3."


# --------------------------------------------------------------------------- a project


PROJECT_YAML = """
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
  env: {{ SCRIPTED_NAME: second, SCRIPTED_TOOLS: "get-thing,hang", SCRIPTED_LOG: "{log}" }}
---
kind: Server
metadata: {{ name: broken }}
spec:
  command: /nonexistent/mcp-server
---
kind: Project
metadata: {{ name: coded }}
spec:
  servers: [everything, scripted, broken]
  proxyModel: codemode
  routes:
    hidden: [everything__get-env]
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    spec = tmp_path / "project.yaml"
    text = PROJECT_YAML.format(SERVER_JS=SERVER_JS, sys=sys, SCRIPTED=SCRIPTED, log=tmp_path / "scripted.log")
    spec.write_text(text, encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home")}
    done = subprocess.run([PROXY or "", "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return tmp_path / "home"


@asynccontextmanager
async def project_client(home: Path) -> AsyncIterator[Client]:
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    params = StdioServerParameters(command=PROXY or "", args=["proxy", "coded"], env=env)
    async with Client(stdio_client(params), mode="legacy", read_timeout_seconds=READ_TIMEOUT, cache=None) as client:
        yield client


async def test_a_project_is_one_namespace_per_server(home: Path) -> None:
    async with project_client(home) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == FOUR
        overview = await client.call_tool("overview", {})
        data = overview.structured_content
        assert data is not None
        by_name = {ns["namespace"]: ns for ns in data["namespaces"]}
        assert by_name["everything"]["status"] == "ok" and by_name["scripted"]["status"] == "ok"
        assert by_name["broken"]["status"] == "error" and by_name["broken"]["error"], by_name["broken"]
        assert by_name["everything"]["toolCount"] >= len(BASE_TOOLS) - 1

        code = """
            const [echoed, sum, thing] = await Promise.all([
                everything.echo({ message: "two servers" }),
                everything["get-sum"]({ a: 20, b: 22 }),
                scripted.getThing({}),
            ]);
            return { echoed, sum, thing };
        """
        value = result_of(await execute(client, code))
        assert value["echoed"] == "Echo: two servers"
        assert "42" in json.dumps(value["sum"])
        assert value["thing"] == "called get-thing by second"


async def test_a_hidden_tool_does_not_exist_in_code(home: Path) -> None:
    async with project_client(home) as client:
        by_method = error_of(await execute(client, "return await everything.getEnv({});"))
        assert "everything.getEnv" in by_method and "not a tool" in by_method, by_method
        by_index = error_of(await execute(client, "const name = 'get' + '-env'; return await everything[name]({});"))
        assert "not a tool" in by_index, by_index
        present = result_of(await execute(client, "return ['get-env' in everything, 'getEnv' in everything, 'echo' in everything];"))
        assert present == [False, False, True]
        found = await client.call_tool("search_tools", {"query": "get-env environment variables"})
        assert found.structured_content is not None
        assert all(r["tool"] != "get-env" for r in found.structured_content["results"])
        inspected = await client.call_tool("inspect", {"names": ["everything.getEnv"]})
        assert inspected.is_error


async def test_cancelling_execute_cancels_its_inner_call_upstream(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "scripted.log"

    def received(method: str) -> list[dict[str, Any]]:
        if not log.exists():
            return []
        lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [line for line in lines if line.get("method") == method]

    async with project_client(home) as client:
        async with anyio.create_task_group() as group:

            async def hang() -> None:
                await execute(client, "return await scripted.hang({});")

            group.start_soon(hang)
            with anyio.fail_after(EVENT_TIMEOUT):
                while not [c for c in received("tools/call") if c.get("id") is not None]:
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()
        with anyio.fail_after(EVENT_TIMEOUT):
            while not received("notifications/cancelled"):
                await anyio.sleep(0.05)
        assert result_of(await execute(client, "return await scripted.t({});")) == "called t by second"


# --------------------------------------------------------------------------- HTTP


def served() -> ServedProcess:
    """`mcpctl serve --listen 127.0.0.1:0 --model codemode -- CMD`, and its URL."""
    return ServedProcess(
        [PROXY or "", "serve", "--listen", "127.0.0.1:0", "--model", "codemode", "--", "node", str(SERVER_JS), "stdio"],
        failure="mcpctl serve did not print `listening on URL`",
    )


async def test_code_mode_over_http() -> None:
    with served() as serving:
        assert serving.url is not None
        transport = streamable_http_client(serving.url)
        async with Client(transport, mode="legacy", read_timeout_seconds=READ_TIMEOUT, cache=None) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == FOUR
            value = result_of(await execute(client, "return await upstream.getSum({ a: 1, b: 2 });"))
            assert "3" in json.dumps(value)
            assert error_of(await execute(client, "throw new TypeError('typed');")).startswith("TypeError at line 1")
            assert result_of(await execute(client, "return 'ok';")) == "ok"


async def test_executes_over_the_process_wide_limit_wait_then_are_refused() -> None:
    """Three sessions of one `mcpctl serve` run a spinning snippet each; the process runs one
    sandbox at a time (`maxConcurrentExecutes=1`), so the others wait `executeQueueMs` and are
    refused naming the field to raise; the turn comes back afterwards."""
    limits = ["--set", "codemode.maxConcurrentExecutes=1", "--set", "codemode.executeQueueMs=100",
              "--set", "codemode.timeoutMs=1500", "--set", "codemode.typeChecker=off"]
    with ServedProcess(
        [PROXY or "", "serve", "--listen", "127.0.0.1:0", "--model", "codemode", *limits,
         "--", "node", str(SERVER_JS), "stdio"],
        failure="mcpctl serve did not print `listening on URL`",
    ) as serving:
        assert serving.url is not None
        url = serving.url
        answers: list[str] = []

        async def spin() -> None:
            async with Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                              cache=None) as client:
                answers.append(error_of(await execute(client, "for (;;) {}")))

        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(spin)
        ran = [a for a in answers if a.startswith("Timeout")]
        refused = [a for a in answers if a.startswith("Busy")]
        assert (len(ran), len(refused)) == (1, 2), answers
        assert all("maxConcurrentExecutes (1)" in a and "executeQueueMs" in a for a in refused), refused
        async with Client(streamable_http_client(url), mode="legacy", read_timeout_seconds=READ_TIMEOUT,
                          cache=None) as client:
            assert result_of(await execute(client, "return 'my turn';")) == "my turn"
            limits_seen = (await client.call_tool("overview", {})).structured_content["limits"]
            assert limits_seen["maxConcurrentExecutes"] == 1 and limits_seen["executeQueueMs"] == 100


async def test_a_tool_hidden_by_a_live_change_leaves_code_mode_at_once(home: Path) -> None:
    """`mcpctl apply` of the project with one more hidden route, while a session is open: code
    mode's search and inspect stop describing the tool, and execute cannot call it."""
    notes: EventLog[str] = EventLog("notifications")

    async def on_message(message: object) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            notes.append(method)

    env = {**os.environ, "MCPCTL_HOME": str(home)}
    params = StdioServerParameters(command=PROXY or "", args=["proxy", "coded"], env=env)
    async with Client(stdio_client(params), mode="legacy", read_timeout_seconds=READ_TIMEOUT, cache=None,
                      message_handler=on_message) as client:

        async def found(query: str) -> list[str]:
            answer = await client.call_tool("search_tools", {"query": query})
            assert answer.structured_content is not None
            return [r["name"] for r in answer.structured_content["results"]]

        assert "everything.echo" in await found("echo")
        assert result_of(await execute(client, "return await everything.echo({ message: 'before' });")) == "Echo: before"

        spec = home.parent / "project.yaml"
        spec.write_text(spec.read_text(encoding="utf-8").replace(
            "hidden: [everything__get-env]", "hidden: [everything__get-env, everything__echo]"), encoding="utf-8")
        start = notes.mark()
        done = subprocess.run([PROXY or "", "apply", "-f", str(spec)], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        await notes.wait_for(lambda m: m == "notifications/tools/list_changed", start=start,
                             what="tools/list_changed after the change")

        assert "everything.echo" not in await found("echo")
        inspected = await client.call_tool("inspect", {"names": ["everything.echo"]})
        assert inspected.is_error, inspected
        by_method = error_of(await execute(client, "return await everything.echo({ message: 'after' });"))
        assert "everything.echo" in by_method, by_method
        by_index = error_of(await execute(client, "const name = 'ec' + 'ho'; return await everything[name]({ message: 'after' });"))
        assert "not a tool" in by_index, by_index
