"""`ctx.llm()` sampling as input rounds for 2026-07-28 clients, sealed `requestState`, and
`notifications/cancelled` for abandoned sampling of 2025-11-25 clients.

The `summarize` model calls `ctx.llm()` for a large text result. Through `mcpctl proxy` (stdio)
and `mcpctl serve` (HTTP), with the official Python client:

- **2026-07-28 clients** (`mode="2026-07-28"`) cannot be sent requests: the proxy answers the
  `tools/call` with `resultType: "input_required"` carrying the `sampling/createMessage`
  request and a sealed `requestState`; the SDK answers with its `sampling_callback` and
  retries; the summary answers the retry. Bridged (server-everything only has the 2025
  handshake) and not (the Python SDK's dual-era fixture server speaks 2026-07-28), and several
  rounds in one call (one per text block).
- A round the client never comes back for expires (`--request-state-ttl`): the hook gets an
  `LlmError` (summarize logs it and returns the original), and the stale state is refused.
- A changed `requestState`, or one replayed on another session (another client of the same
  `mcpctl serve`, or another proxy process with the same `--state-key-file`), gets -32602 and
  resumes nothing; the genuine one still works afterwards.
- **2025-11-25 clients** get a real `sampling/createMessage`; when the call is cancelled, or
  the completion times out, while the client still has the request, the client receives
  `notifications/cancelled` for it.

Needs `MCP_PROXY` (the built `mcpctl`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("MCP_PROXY is not set: this module runs the proxy's summarize model", allow_module_level=True)

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from conftest import (  # noqa: E402
    EVENT_TIMEOUT,
    READ_TIMEOUT,
    SERVER_JS,
    EventLog,
    ServedProcess,
    WireMsg,
    _TapRead,
    _TapWrite,
    tapped_stdio,
    text_of,
)
from mcp import Client  # noqa: E402
from mcp.client.session import ClientRequestContext  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types.jsonrpc import INVALID_PARAMS  # noqa: E402

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
EVERYTHING = ["node", str(SERVER_JS), "stdio"]
DUAL = [sys.executable, str(HERE / "servers" / "dual_server.py")]
SCRIPTED = [sys.executable, str(HERE.parent / "fixtures" / "scripted_upstream.py")]
MODERN = "2026-07-28"
#: Every test summarizes its own text: the project cache must not answer for another test.
NO_CACHE = ["--set", "summarize.cacheSeconds=0"]
CURSOR = re.compile(r'call the tool read_page with \{"cursor": "([^"]+)"\}')


def long_text(tag: str) -> str:
    """About 22 KiB, over summarize's default 8 KiB threshold."""
    return "".join(f"{tag} {n:04d} the quick brown fox jumps over the lazy dog\n" for n in range(400))


class Sampler:
    """A `sampling_callback`: records each request and answers a numbered summary; with
    `hold`, it waits (until `release`) and so never answers while the test runs."""

    def __init__(self, hold: bool = False) -> None:
        self.requests: EventLog[types.CreateMessageRequestParams] = EventLog("sampling")
        self.cancelled: EventLog[int] = EventLog("sampling cancelled")
        self.hold = hold
        self.release = anyio.Event()

    async def __call__(self, ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        if self.hold:
            try:
                await self.release.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(len(self.requests.items))
                raise
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"SAMPLED SUMMARY #{len(self.requests.items)}"),
            model="rounds-model",
            stop_reason="endTurn",
        )


def answer(n: int) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"MANUAL SUMMARY #{n}"),
        model="rounds-model",
        stop_reason="endTurn",
    )


class Stderr:
    """A pipe for a child's stderr whose lines can be awaited (`wait_for`)."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.writer = os.fdopen(write, "w")
        self._reader = os.fdopen(read, "r", encoding="utf-8", errors="replace")
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        for line in self._reader:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def text(self) -> str:
        with self._changed:
            return "".join(self.lines)

    async def wait_for(self, needle: str) -> str:
        def wait() -> str | None:
            with self._changed:
                found = self._changed.wait_for(lambda: needle in "".join(self.lines), EVENT_TIMEOUT)
                return "".join(self.lines) if found else None

        seen = await anyio.to_thread.run_sync(wait)
        if seen is None:
            pytest.fail(f"the proxy never logged {needle!r}; its stderr:\n{self.text()[-3000:]}")
        return seen

    def close(self) -> None:
        self.writer.close()
        self._thread.join(5)
        self._reader.close()


@contextmanager
def stderr_pipe() -> Iterator[Stderr]:
    pipe = Stderr()
    try:
        yield pipe
    finally:
        pipe.close()


@asynccontextmanager
async def stdio_client_of(
    args: list[str], mode: str, sampler: Sampler | None, errlog: Any, wire: EventLog[WireMsg] | None = None
) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=PROXY or "", args=args, env=dict(os.environ))
    transport = tapped_stdio(params, wire if wire is not None else EventLog("wire"), errlog)
    try:
        async with Client(
            transport,
            mode=mode,
            read_timeout_seconds=READ_TIMEOUT,
            sampling_callback=sampler,
            client_info=types.Implementation(name="llm-rounds-interop", version="1.0.0"),
            cache=None,
        ) as client:
            yield client
    except BaseException:
        show_errlog(errlog)
        raise


def show_errlog(errlog: Any) -> None:
    """Prints what the proxies wrote to `errlog` so far, for the report of a failing test (a
    "Connection closed" says nothing of why the proxy went away)."""
    try:
        errlog.flush()
        at = errlog.tell()
        errlog.seek(0)
        text = errlog.read()
        errlog.seek(at)
    except (OSError, ValueError):
        return
    print(f"--- the proxies' stderr (last 20,000 characters) ---\n{text[-20000:]}", file=sys.stderr)


@asynccontextmanager
async def http_client_of(url: str, name: str, sampler: Sampler | None, wire: EventLog[WireMsg]) -> AsyncIterator[Client]:
    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with streamable_http_client(url) as (read_stream, write_stream):
            yield _TapRead(read_stream, wire), _TapWrite(write_stream, wire)

    async with Client(
        transport(),
        mode=MODERN,
        read_timeout_seconds=READ_TIMEOUT,
        sampling_callback=sampler,
        client_info=types.Implementation(name=name, version="1.0.0"),
        cache=None,
    ) as client:
        yield client


def summarize(*extra: str, upstream: list[str] = EVERYTHING) -> list[str]:
    return ["proxy", "--model", "summarize", *NO_CACHE, *extra, "--", *upstream]


def only_text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    assert len(result.content) == 1, result
    return text_of(result.content[0])


def input_rounds(wire: EventLog[WireMsg], start: int = 0) -> list[dict[str, Any]]:
    """The `input_required` results the client received since `start`."""
    return [
        m.data["result"]
        for m in wire.items[start:]
        if m.direction == "in" and m.is_response and (m.data.get("result") or {}).get("resultType") == "input_required"
    ]


async def read_first_page(client: Client, summary: str) -> str:
    found = CURSOR.search(summary)
    assert found, summary
    return only_text(await client.call_tool("read_page", {"cursor": found.group(1)}))


# =========================================================================== 2026-07-28 clients


@pytest.mark.parametrize("upstream", ["bridged", "modern"])
async def test_a_2026_client_answers_the_sampling_in_an_input_round(upstream: str) -> None:
    """Through `mcpctl proxy`: the summary is the client's sampling answer, carried by one input
    round of the `tools/call`, whether the proxy bridges (server-everything) or not (a 2026-07-28
    upstream)."""
    sampler, wire = Sampler(), EventLog[WireMsg]("wire")
    tool, args, echoed = ("echo", "message", "Echo: ") if upstream == "bridged" else ("echo", "text", "echo: ")
    text = long_text(f"modern-{upstream}")
    command = EVERYTHING if upstream == "bridged" else DUAL
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        async with stdio_client_of(summarize(upstream=command), MODERN, sampler, errlog, wire) as client:
            assert client.protocol_version == MODERN
            mark = wire.mark()
            summary = only_text(await client.call_tool(tool, {args: text}))
            assert summary.startswith("SAMPLED SUMMARY #1\n\n[summary of "), summary
            assert len(sampler.requests.items) == 1
            prompt = text_of(sampler.requests.items[0].messages[0].content)
            assert f"{echoed}{text}" in prompt, "the LLM is sent the whole text"

            (round_,) = input_rounds(wire, mark)
            (request,) = round_["inputRequests"].values()
            assert request["method"] == "sampling/createMessage"
            assert request["params"]["maxTokens"] == 512
            assert round_["requestState"].startswith("mcpmw1."), "the proxy's state is sealed"
            assert "hook" not in round_["requestState"], "and not readable"
            calls = [m for m in wire.items[mark:] if m.direction == "out" and m.method == "tools/call"]
            assert len(calls) == 2 and calls[0].id != calls[1].id, "the retry is a new request"
            assert calls[1].params["requestState"] == round_["requestState"]
            assert not [m for m in wire.items[mark:] if m.direction == "in" and m.method == "sampling/createMessage"]

            # The original is still readable page by page.
            assert (await read_first_page(client, summary)).startswith(f"{echoed}modern-{upstream} 0000")


async def test_several_completions_in_one_call_are_several_rounds() -> None:
    """A result of three large text blocks (the scripted upstream's `texts` tool): each is
    summarized, one completion after the other: three rounds of one call."""
    sampler, wire = Sampler(), EventLog[WireMsg]("wire")
    args = summarize("--set", "paginate.pageBytes=100000", upstream=SCRIPTED)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        async with stdio_client_of(args, MODERN, sampler, errlog, wire) as client:
            mark = wire.mark()
            blocks = [long_text(f"block-{n}") for n in range(3)]
            result = await client.call_tool("texts", {"texts": blocks})
            assert not result.is_error, result
            texts = [text_of(block) for block in result.content]
            assert [t.split("\n", 1)[0] for t in texts] == [f"SAMPLED SUMMARY #{n}" for n in (1, 2, 3)], texts
            assert len(sampler.requests.items) == 3
            for n, asked in enumerate(sampler.requests.items):
                assert blocks[n] in text_of(asked.messages[0].content)
            rounds = input_rounds(wire, mark)
            assert len(rounds) == 3, rounds
            assert len({r["requestState"] for r in rounds}) == 3
            keys = [k for r in rounds for k in r["inputRequests"]]
            assert len(set(keys)) == 3, keys


@pytest.mark.parametrize("upstream", ["bridged", "modern"])
async def test_over_http_a_2026_client_answers_the_round(upstream: str) -> None:
    sampler, wire = Sampler(), EventLog[WireMsg]("wire")
    text = long_text("http")
    command, arg, echoed = (EVERYTHING, "message", "Echo: ") if upstream == "bridged" else (DUAL, "text", "echo: ")
    with ServedProcess([PROXY or "", "serve", "--listen", "127.0.0.1:0", "--model", "summarize", *NO_CACHE,
                        "--", *command]) as served:
        assert served.url is not None
        async with http_client_of(served.url, "llm-rounds-http", sampler, wire) as client:
            mark = wire.mark()
            summary = only_text(await client.call_tool("echo", {arg: text}))
            assert summary.startswith("SAMPLED SUMMARY #1\n\n[summary of "), summary
            assert len(input_rounds(wire, mark)) == 1
            assert (await read_first_page(client, summary)).startswith(f"{echoed}http 0000")


async def first_round(client: Client, text: str) -> types.InputRequiredResult:
    """The input round a summarized `echo` is answered with, the loop driven by hand (the client
    declares sampling, but its callback is not used)."""
    result = await client.session.call_tool("echo", {"message": text}, allow_input_required=True)
    assert isinstance(result, types.InputRequiredResult), result
    assert result.input_requests and result.request_state
    return result


def answers(round_: types.InputRequiredResult, n: int) -> dict[str, Any]:
    assert round_.input_requests
    return {key: answer(n) for key in round_.input_requests}


async def test_a_round_the_client_never_answers_expires() -> None:
    """With `--request-state-ttl 1` and a client that does not retry: the hook's completion
    fails with a clear error (summarize logs it), and the state is refused afterwards."""
    with stderr_pipe() as err:
        args = summarize("--request-state-ttl", "1")
        async with stdio_client_of(args, MODERN, Sampler(), err.writer) as client:
            round_ = await first_round(client, long_text("never"))
            logged = await err.wait_for("summarize: returning the original result")
            assert "did not answer the input round" in logged and "within 1 s" in logged, logged[-2000:]
            with pytest.raises(MCPError) as refused:
                await client.session.call_tool(
                    "echo", {"message": long_text("never")}, input_responses=answers(round_, 1),
                    request_state=round_.request_state, allow_input_required=True,
                )
            assert refused.value.code == INVALID_PARAMS
            assert "requestState" in refused.value.message and "expired" in refused.value.message
            # The session goes on.
            assert only_text(await client.call_tool("echo", {"message": "short"})) == "Echo: short"


async def test_a_changed_request_state_is_refused_and_the_genuine_one_still_works() -> None:
    text = long_text("tampered")
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        async with stdio_client_of(summarize(), MODERN, Sampler(), errlog) as client:
            round_ = await first_round(client, text)
            state = round_.request_state
            assert state
            at = len(state) // 2
            changed = state[:at] + ("A" if state[at] != "A" else "B") + state[at + 1:]
            for forged in (changed, state + "A", "mcpmw1.x", state[: len(state) // 2]):
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool(
                        "echo", {"message": text}, input_responses=answers(round_, 1),
                        request_state=forged, allow_input_required=True,
                    )
                assert refused.value.code == INVALID_PARAMS, forged
                assert "requestState" in refused.value.message, refused.value.message
            done = await client.session.call_tool(
                "echo", {"message": text}, input_responses=answers(round_, 7),
                request_state=state, allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult), done
            assert only_text(done).startswith("MANUAL SUMMARY #7\n\n[summary of ")
            # Used once: the same state again is refused.
            with pytest.raises(MCPError) as replayed:
                await client.session.call_tool(
                    "echo", {"message": text}, input_responses=answers(round_, 8),
                    request_state=state, allow_input_required=True,
                )
            assert replayed.value.code == INVALID_PARAMS


async def test_a_state_replayed_on_another_session_is_refused() -> None:
    """Two clients of one `mcpctl serve` (one key, two stateless sessions): the second cannot use
    the first's state; the first still can."""
    text = long_text("replayed")
    with ServedProcess([PROXY or "", "serve", "--listen", "127.0.0.1:0", "--model", "summarize", *NO_CACHE,
                        "--", *EVERYTHING]) as served:
        assert served.url is not None
        async with (
            http_client_of(served.url, "llm-rounds-alice", Sampler(), EventLog("alice")) as alice,
            http_client_of(served.url, "llm-rounds-mallory", Sampler(), EventLog("mallory")) as mallory,
        ):
            round_ = await first_round(alice, text)
            with pytest.raises(MCPError) as refused:
                await mallory.session.call_tool(
                    "echo", {"message": text}, input_responses=answers(round_, 1),
                    request_state=round_.request_state, allow_input_required=True,
                )
            assert refused.value.code == INVALID_PARAMS
            assert "not issued to this session" in refused.value.message, refused.value.message
            done = await alice.session.call_tool(
                "echo", {"message": text}, input_responses=answers(round_, 2),
                request_state=round_.request_state, allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult), done
            assert only_text(done).startswith("MANUAL SUMMARY #2\n\n")


async def test_replicas_with_one_key_still_refuse_another_sessions_state(tmp_path: Path) -> None:
    """Two proxies sharing `--state-key-file` (replicas): the key is the same, the session is
    not, so the state is refused; a missing key file is a clear error."""
    key = tmp_path / "state.key"
    key.write_bytes(os.urandom(32))
    text = long_text("replicas")
    args = summarize("--state-key-file", str(key))
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        async with (
            stdio_client_of(args, MODERN, Sampler(), errlog) as first,
            stdio_client_of(args, MODERN, Sampler(), errlog) as second,
        ):
            round_ = await first_round(first, text)
            with pytest.raises(MCPError) as refused:
                await second.session.call_tool(
                    "echo", {"message": text}, input_responses=answers(round_, 1),
                    request_state=round_.request_state, allow_input_required=True,
                )
            assert refused.value.code == INVALID_PARAMS
            assert "not issued to this session" in refused.value.message
    missing = subprocess.run([PROXY or "", *summarize("--state-key-file", str(tmp_path / "none"))],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert missing.returncode != 0
    assert "--state-key-file" in missing.stderr and "could not be read" in missing.stderr, missing.stderr


# =========================================================================== 2025-11-25 clients


@pytest.mark.parametrize("how", ["cancelled", "timed-out"])
async def test_abandoned_sampling_is_cancelled_at_the_client(how: str) -> None:
    """A legacy client whose sampling callback does not answer: when the call is cancelled (or
    the completion's 1 s timeout fires), the client gets `notifications/cancelled` for the
    sampling request, and its callback is cancelled by the SDK."""
    sampler, wire = Sampler(hold=True), EventLog[WireMsg]("wire")
    extra = ["--set", "summarize.timeoutSeconds=1"] if how == "timed-out" else []
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        async with stdio_client_of(summarize(*extra), "legacy", sampler, errlog, wire) as client:
            outcome: dict[str, Any] = {}
            scope = anyio.CancelScope()

            async def call() -> None:
                with scope:
                    outcome["result"] = await client.call_tool("echo", {"message": long_text(how)})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await sampler.requests.wait_for(lambda _: True, what="the sampling request")
                if how == "cancelled":
                    scope.cancel()
            (asked,) = [m for m in wire.items if m.direction == "in" and m.method == "sampling/createMessage"]
            (cancel,) = await wire.wait_for(
                lambda m: m.direction == "in" and m.method == "notifications/cancelled",
                what="notifications/cancelled from the proxy",
            )
            assert cancel.params["requestId"] == asked.id
            await sampler.cancelled.wait_for(lambda _: True, what="the callback cancelled")
            if how == "timed-out":
                assert only_text(outcome["result"]).startswith("Echo: timed-out 0000"), "the original comes back"
            else:
                assert "result" not in outcome
            sampler.release.set()
            assert only_text(await client.call_tool("echo", {"message": "short"})) == "Echo: short"
