"""The `summarize` model and `ctx.llm()` seen by the official Python SDK client,
through `mcpctl proxy --model summarize` (stdio) and `mcpctl serve --model summarize` (HTTP)
in front of the official reference server.

- A client that answers sampling: a long `echo` result comes back as the summary its
  `sampling_callback` wrote, with a `read_page` cursor that reads the full text back.
- A client without sampling, in a project whose `spec.llm` names an OpenAI-compatible
  endpoint the test runs (a tiny `http.server` answering `/v1/chat/completions`): the summary
  comes from the endpoint, which got the key from `${env:VAR}`.
- Neither: the original result (paged by `paginate`) and a warning on the proxy's stderr.

The clients connect with `mode="legacy"` (2025-11-25). A 2026-07-28 client (`mode="2026-07-28"`,
bridged by the proxy) cannot be sent sampling requests: the sampling goes out as an input round
of the tool call (`test_llm_rounds.py` has the details); one that declares no sampling gets the
original back.

Needs `MCP_PROXY` (the built `mcpctl`); without it the module is skipped, like the other
model tests: the reference server alone has no `summarize` model to test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs the proxy's summarize model", allow_module_level=True)

import mcp_types as types  # noqa: E402
from conftest import EVENT_TIMEOUT, READ_TIMEOUT, SERVER_JS, ServedProcess, text_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.session import ClientRequestContext  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

pytestmark = pytest.mark.anyio

SERVER = ["node", str(SERVER_JS), "stdio"]
#: About 22 KiB: over summarize's default 8 KiB threshold.
LONG = "".join(f"{n:04d} the quick brown fox żółw 🐢 jumps over the lazy dog\n" for n in range(400))
ECHOED = f"Echo: {LONG}"
CURSOR = re.compile(r'call the tool read_page with \{"cursor": "([^"]+)"\}')
PAGE_FOOTER = "\n\n[page "
NEXT_PAGE = re.compile(r'\{"cursor": "([^"]+)"\}\]$')


def only_text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    assert len(result.content) == 1, result
    return text_of(result.content[0])


async def read_original(client: Client, summary: str) -> str:
    """Follows the summary's `read_page` cursor through every page of the original."""
    found = CURSOR.search(summary)
    assert found, summary
    cursor: str | None = found.group(1)
    joined = []
    while cursor:
        page = only_text(await client.call_tool("read_page", {"cursor": cursor}))
        at = page.rfind(PAGE_FOOTER)
        assert at >= 0, page[-300:]
        joined.append(page[:at])
        next_page = NEXT_PAGE.search(page[at:])
        cursor = next_page.group(1) if next_page else None
    return "".join(joined)


class Sampler:
    """A `sampling_callback` that records what it was asked and answers with a marked summary."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"SUMMARY FROM THE CALLBACK #{len(self.requests)}"),
            model="callback-model",
            stop_reason="endTurn",
        )


def client_of(transport: Any, sampler: Sampler | None, mode: str = "legacy") -> Client:
    return Client(
        transport,
        mode=mode,
        read_timeout_seconds=READ_TIMEOUT,
        sampling_callback=sampler,
        client_info=types.Implementation(name="summarize-interop", version="1.0.0"),
        cache=None,
    )


@contextmanager
def stderr_file() -> Iterator[Any]:
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        yield errlog


def stdio(args: list[str], errlog: Any, env: dict[str, str] | None = None) -> Any:
    params = StdioServerParameters(command=PROXY or "", args=args, env=env or dict(os.environ))
    return stdio_client(params, errlog=errlog)


def assert_sampled(sampler: Sampler, count: int) -> None:
    assert len(sampler.requests) == count, sampler.requests
    asked = sampler.requests[-1]
    assert asked.max_tokens == 512
    assert asked.system_prompt and "summarize" in asked.system_prompt.lower()
    prompt = text_of(asked.messages[0].content)
    assert "Summarize the following tool result" in prompt
    assert ECHOED in prompt, "the LLM is sent the whole text"


async def test_a_sampling_client_gets_the_callbacks_summary_and_can_read_the_original() -> None:
    sampler = Sampler()
    with stderr_file() as errlog:
        args = ["proxy", "--model", "summarize", "--set", "paginate.pageBytes=4096", "--", *SERVER]
        async with client_of(stdio(args, errlog), sampler) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo", "read_page"} <= tools

            short = only_text(await client.call_tool("echo", {"message": "short"}))
            assert short == "Echo: short"
            assert sampler.requests == [], "text under the threshold is not summarized"

            summary = only_text(await client.call_tool("echo", {"message": LONG}))
            assert summary.startswith("SUMMARY FROM THE CALLBACK #1\n\n[summary of "), summary
            assert "the full text is 7 pages" in summary, summary
            assert_sampled(sampler, 1)
            assert await read_original(client, summary) == ECHOED

            # The same text again: the project's cache answers, the client is not asked twice.
            again = only_text(await client.call_tool("echo", {"message": LONG}))
            assert again.startswith("SUMMARY FROM THE CALLBACK #1\n\n"), again
            assert len(sampler.requests) == 1
            assert await read_original(client, again) == ECHOED


def served(args: list[str]) -> ServedProcess:
    """`mcpctl serve ARGS` as a child process: its URL and what it wrote on stderr."""
    return ServedProcess([PROXY or "", "serve", "--listen", "127.0.0.1:0", *args],
                         failure="mcpctl serve did not print `listening on URL`")


async def test_over_http_the_summary_comes_from_the_clients_sampling() -> None:
    sampler = Sampler()
    with served(["--model", "summarize", "--", *SERVER]) as running:
        assert running.url is not None
        async with client_of(streamable_http_client(running.url), sampler) as client:
            summary = only_text(await client.call_tool("echo", {"message": LONG}))
            assert summary.startswith("SUMMARY FROM THE CALLBACK #1\n\n[summary of "), summary
            assert_sampled(sampler, 1)
            assert await read_original(client, summary) == ECHOED


class FakeOpenAI:
    """A chat completions endpoint on 127.0.0.1: records each request, answers a summary."""

    def __init__(self, hang: bool = False) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        #: With `hang`, requests are answered only once this is set (at `stop`).
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if hang:
                    fake.release.wait(EVENT_TIMEOUT)
                answer = json.dumps({
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": body.get("model", ""),
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": "SUMMARY FROM THE ENDPOINT"},
                        "finish_reason": "stop",
                    }],
                }).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    try:
        yield fake
    finally:
        fake.stop()


def apply(home: Path, yaml: str) -> subprocess.CompletedProcess[str]:
    spec = home.parent / "project.yaml"
    spec.write_text(yaml, encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(home)}
    return subprocess.run([PROXY or "", "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)


def project_yaml(llm: str) -> str:
    return f"""
kind: Server
metadata: {{ name: everything }}
spec:
  command: node
  args: ["{SERVER_JS}", stdio]
---
kind: Project
metadata: {{ name: summaries }}
spec:
  servers: [everything]
  proxyModel: summarize
{llm}
"""


async def test_without_sampling_the_projects_endpoint_summarizes(endpoint: FakeOpenAI, tmp_path: Path) -> None:
    home = tmp_path / "home"
    llm = f"  llm: {{ url: '{endpoint.url}', model: tiny-summarizer, apiKey: '${{env:SUMMARIZE_TEST_KEY}}' }}"
    done = apply(home, project_yaml(llm))
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "MCPCTL_HOME": str(home), "SUMMARIZE_TEST_KEY": "sk-test-4242"}
    described = subprocess.run([PROXY or "", "describe", "project", "summaries"], env=env, capture_output=True,
                               text=True, timeout=60)
    assert described.returncode == 0, described.stderr
    shown = f"LLM endpoint:        {endpoint.url} (model tiny-summarizer, key ${{env:SUMMARIZE_TEST_KEY}})"
    assert shown in described.stdout, described.stdout
    assert "sk-test-4242" not in described.stdout
    with stderr_file() as errlog:
        async with client_of(stdio(["proxy", "summaries"], errlog, env), None) as client:
            summary = only_text(await client.call_tool("echo", {"message": LONG}))
            assert summary.startswith("SUMMARY FROM THE ENDPOINT\n\n[summary of "), summary
            assert await read_original(client, summary) == ECHOED
        errlog.seek(0)
        assert "sk-test-4242" not in errlog.read(), "the key never reaches a log"
    assert len(endpoint.requests) == 1
    path, headers, body = endpoint.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["authorization"] == "Bearer sk-test-4242"
    assert body["model"] == "tiny-summarizer"
    assert body["max_tokens"] == 512
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert ECHOED in body["messages"][1]["content"]


async def test_a_bad_llm_spec_is_refused_at_apply(tmp_path: Path) -> None:
    home = tmp_path / "home"
    literal = apply(home, project_yaml("  llm: { url: 'http://127.0.0.1:1/v1', model: m, apiKey: sk-literal }"))
    assert literal.returncode != 0
    assert "llm.apiKey" in literal.stderr and "${env:VAR}" in literal.stderr, literal.stderr
    assert "sk-literal" not in literal.stderr
    bad_url = apply(home, project_yaml("  llm: { url: 'ftp://host/v1', model: m }"))
    assert bad_url.returncode != 0
    assert "llm.url" in bad_url.stderr, bad_url.stderr
    unknown = apply(home, project_yaml("  llm: { url: 'http://127.0.0.1:1/v1', model: m, key: x }"))
    assert unknown.returncode != 0
    assert "key" in unknown.stderr, unknown.stderr


async def test_with_neither_the_original_comes_back_paged_and_a_warning_is_logged() -> None:
    with stderr_file() as errlog:
        args = ["proxy", "--model", "summarize", "--set", "paginate.pageBytes=4096", "--", *SERVER]
        async with client_of(stdio(args, errlog), None) as client:
            first = only_text(await client.call_tool("echo", {"message": LONG}))
            assert first.startswith("Echo: 0000 the quick brown fox"), first[:200]
            assert "[page 1 of 7" in first, first[-300:]
            assert "summary" not in first
        errlog.seek(0)
        logged = errlog.read()
    assert "summarize: returning the original result" in logged, logged[-2000:]
    assert "sampling" in logged and "--llm-url" in logged, "the warning names both ways"


async def test_a_stateless_client_is_sampled_through_an_input_round() -> None:
    sampler = Sampler()
    with stderr_file() as errlog:
        args = ["proxy", "--model", "summarize", "--set", "paginate.pageBytes=4096", "--", *SERVER]
        async with client_of(stdio(args, errlog), sampler, mode="2026-07-28") as client:
            summary = only_text(await client.call_tool("echo", {"message": LONG}))
            assert summary.startswith("SUMMARY FROM THE CALLBACK #1\n\n[summary of "), summary
            assert_sampled(sampler, 1)
            assert await read_original(client, summary) == ECHOED


async def test_a_stateless_client_without_sampling_gets_the_original() -> None:
    with stderr_file() as errlog:
        args = ["proxy", "--model", "summarize", "--set", "paginate.pageBytes=4096", "--", *SERVER]
        async with client_of(stdio(args, errlog), None, mode="2026-07-28") as client:
            first = only_text(await client.call_tool("echo", {"message": LONG + "no sampling"}))
            assert "[page 1 of 7" in first, first[-300:]
        errlog.seek(0)
        logged = errlog.read()
    assert "summarize: returning the original result" in logged, logged[-2000:]
    assert "2026-07-28 requests do not declare the `sampling` capability" in logged, logged[-2000:]


async def test_an_endpoint_that_does_not_answer_in_time_gives_the_original() -> None:
    hanging = FakeOpenAI(hang=True)
    try:
        with stderr_file() as errlog:
            args = [
                "proxy", "--model", "summarize", "--set", "summarize.timeoutSeconds=1",
                "--llm-url", hanging.url, "--llm-model", "slow-model", "--", *SERVER,
            ]
            async with client_of(stdio(args, errlog), None) as client:
                first = only_text(await client.call_tool("echo", {"message": LONG}))
                assert first == ECHOED, "under paginate's default page size: the original as it is"
            errlog.seek(0)
            logged = errlog.read()
    finally:
        hanging.stop()
    assert len(hanging.requests) == 1, "the flags' endpoint was asked"
    assert hanging.requests[0][2]["model"] == "slow-model"
    assert "did not answer within 1 s" in logged, logged[-2000:]


async def test_the_api_keys_variable_never_reaches_the_server() -> None:
    env = {**os.environ, "SUMMARIZE_TEST_KEY": "sk-test-4242"}
    args = [
        "proxy", "--model", "summarize", "--set", "summarize.thresholdBytes=100000000",
        "--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m", "--llm-api-key-env", "SUMMARIZE_TEST_KEY",
        "--", *SERVER,
    ]
    with stderr_file() as errlog:
        async with client_of(stdio(args, errlog, env), None) as client:
            seen = only_text(await client.call_tool("get-env", {}))
    assert "PATH" in seen, seen[:300]
    assert "SUMMARIZE_TEST_KEY" not in seen and "sk-test-4242" not in seen
