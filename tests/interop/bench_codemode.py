"""Code mode costs, measured through the real binary with the official Python client (not a test).

    MCP_PROXY=target/debug/mcpctl tests/interop/.venv/bin/python tests/interop/bench_codemode.py

Prints, for the reference server behind `mcpctl proxy`: the bytes of `tools/list` through
`passthrough` and through `codemode`; the median time of `echo` called directly (through
`passthrough`) and of an `execute` making the same one call (through `codemode`); an `execute`
making no call (sandbox start); and 100 sequential inner calls in one `execute`, per call.
The client's own time is in every number, so compare within one run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import SERVER_JS  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

PROXY = os.environ.get("MCP_PROXY") or sys.exit("set MCP_PROXY to the mcpctl binary")
RUNS = int(os.environ.get("RUNS", "50"))


def client(model: str) -> Client:
    params = StdioServerParameters(
        command=PROXY, args=["proxy", "--model", model, "--", "node", str(SERVER_JS), "stdio"], env=dict(os.environ)
    )
    return Client(stdio_client(params), mode="legacy", cache=None)


async def median_ms(call, runs: int = RUNS) -> float:
    for _ in range(3):
        await call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def listing_bytes(tools) -> int:
    return len(json.dumps({"tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]}))


async def main() -> None:
    async with client("passthrough") as direct, client("codemode") as coded:
        plain = listing_bytes((await direct.list_tools()).tools)
        four = listing_bytes((await coded.list_tools()).tools)
        print(f"tools/list: passthrough {plain} bytes, codemode {four} bytes ({100 * (1 - four / plain):.1f}% fewer)")

        async def echo() -> None:
            assert not (await direct.call_tool("echo", {"message": "x"})).is_error

        async def execute_echo() -> None:
            done = await coded.call_tool("execute", {"code": "return await upstream.echo({ message: 'x' });"})
            assert not done.is_error, done

        async def execute_nothing() -> None:
            assert not (await coded.call_tool("execute", {"code": "return 1;"})).is_error

        direct_ms = await median_ms(echo)
        coded_ms = await median_ms(execute_echo)
        empty_ms = await median_ms(execute_nothing)
        print(f"echo direct (passthrough): {direct_ms:.2f} ms median of {RUNS}")
        print(f"execute with one echo:     {coded_ms:.2f} ms (+{coded_ms - direct_ms:.2f} ms)")
        print(f"execute with no call:      {empty_ms:.2f} ms (sandbox start, strip, answer)")

        hundred = "for (let i = 0; i < 100; i++) { await upstream.echo({ message: 'x' }); } return 1;"

        async def execute_hundred() -> None:
            done = await coded.call_tool("execute", {"code": hundred})
            assert not done.is_error, done

        many_ms = await median_ms(execute_hundred, runs=max(5, RUNS // 10))
        per_call = (many_ms - empty_ms) / 100
        print(f"execute with 100 sequential echoes: {many_ms:.1f} ms, {per_call:.3f} ms per call "
              f"({per_call - direct_ms:+.3f} ms vs a direct call from the client)")


anyio.run(main)
