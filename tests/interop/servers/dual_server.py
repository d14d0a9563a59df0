"""Fixture server for test_eras.py: a Python SDK (`mcp` 2.3.0) `MCPServer` over stdio.

`MCPServer.run()` serves *both* protocol eras on stdio (the SDK's dual-era loop): the first
request decides.  An `initialize` makes it a 2025-11-25 server; a request carrying the
2026-07-28 `_meta` envelope makes it a 2026-07-28 (stateless) server.

The tools that need the client (`greet`, `sample_and_roots`) take their input through
`Resolve(...)`: on a 2025-11-25 connection the SDK sends a real server->client request
(`elicitation/create`, `sampling/createMessage`, `roots/list`) while the call is pending; on
2026-07-28 it answers the call with `resultType: "input_required"` and resumes on the
client's retry (multi-round-trip requests).  So the same fixture exercises both mechanisms.

`legacy_server.py` serves the same definitions with the 2025-11-25 handshake only.

Run: `python dual_server.py` (stdio).
"""

from __future__ import annotations

from typing import Annotated

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from pydantic import BaseModel

SERVER_NAME = "interop-dual-server"
SERVER_VERSION = "1.2.3"
INSTRUCTIONS = "Fixture server of the MCP interop suite (both protocol eras)."
GREETING_URI = "dual://greeting"
GREETING_TEXT = "Hello from the dual-era fixture server."

mcp = MCPServer(SERVER_NAME, version=SERVER_VERSION, instructions=INSTRUCTIONS)


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_llm(topic: str) -> Sample:
    # A resolver may take the tool's own arguments by name.
    return Sample(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"Summarize: {topic}"))],
        max_tokens=64,
    )


def ask_roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
def echo(text: str) -> str:
    """Returns its input."""
    return f"echo: {text}"


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two integers (structured output: {"result": a + b})."""
    return a + b


@mcp.tool()
async def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Greets the user after eliciting their name from the client."""
    return f"hello {who.name}"


@mcp.tool()
async def sample_and_roots(
    topic: str,
    sampled: Annotated[types.CreateMessageResult, Resolve(ask_llm)],
    roots: Annotated[types.ListRootsResult, Resolve(ask_roots)],
) -> str:
    """Samples the client's LLM about `topic` and lists the client's roots."""
    assert isinstance(sampled.content, types.TextContent)
    return f"llm said: {sampled.content.text}; roots: {', '.join(str(r.uri) for r in roots.roots)}"


@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Reports `steps` progress notifications, then returns."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done after {steps} steps"


@mcp.tool()
async def greet_with_progress(steps: int, who: Annotated[Name, Resolve(ask_name)], ctx: Context) -> str:
    """Elicits the user's name, then reports `steps` progress notifications (after the input round)."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"greeting {i}")
    return f"hello {who.name} after {steps} steps"


# Two calls in flight at once: `gated_greet` asks for the user's name only once `open_gate` is
# running, so the server's question arrives while *both* calls are pending.
_gate = anyio.Event()
_greeted = anyio.Event()


async def ask_name_after_gate() -> Elicit[Name]:
    with anyio.fail_after(20):
        await _gate.wait()
    return Elicit("What is your name (gated)?", Name)


@mcp.tool()
async def gated_greet(who: Annotated[Name, Resolve(ask_name_after_gate)]) -> str:
    """Waits until `open_gate` runs, then elicits the user's name."""
    _greeted.set()
    return f"hello {who.name} (gated)"


@mcp.tool()
async def open_gate() -> str:
    """Lets `gated_greet` ask its question, then waits until `gated_greet` has finished."""
    _gate.set()
    with anyio.fail_after(20):
        await _greeted.wait()
    return "gate opened"


@mcp.tool()
def fail(reason: str) -> str:
    """Always fails with a tool error (an `isError` result)."""
    raise ToolError(f"failed on purpose: {reason}")


@mcp.resource(GREETING_URI, name="greeting", mime_type="text/plain")
def greeting() -> str:
    return GREETING_TEXT


@mcp.prompt()
def welcome(name: str, style: str = "plain") -> str:
    """A welcome message for `name`."""
    return f"Write a {style} welcome message for {name}."


if __name__ == "__main__":
    mcp.run()  # stdio, dual-era
