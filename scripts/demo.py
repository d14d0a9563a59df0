"""The main job, seen from a client: the official MCP Python SDK talks to the official reference
server directly, then through `mcpctl proxy --model passthrough`, and prints what it got each way.

Usage: demo.py MCPCTL [--model NAME]
"""

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


async def sample(ctx, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="(the demo client's sampled answer)"),
        model="demo-model",
        stop_reason="endTurn",
    )


async def session_view(params: StdioServerParameters) -> dict:
    """What a client sees of the server: a few calls of each kind, as plain JSON."""
    async with Client(params, mode="legacy", sampling_callback=sample) as client:
        tools = await client.list_tools()
        echo = await client.call_tool("echo", {"message": "hello through the proxy"})
        total = await client.call_tool("get-sum", {"a": 20, "b": 22})
        sampled = await client.call_tool("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
        resources = await client.list_resources()
        first = await client.read_resource(resources.resources[0].uri)
        prompts = await client.list_prompts()
        return {
            "protocol": client.protocol_version,
            "tools": [t.name for t in tools.tools],
            "echo": echo.model_dump(mode="json", exclude_none=True)["content"],
            "get-sum": total.model_dump(mode="json", exclude_none=True)["content"],
            "sampling": sampled.model_dump(mode="json", exclude_none=True)["content"][0]["text"][:80],
            "first resource": first.model_dump(mode="json", exclude_none=True)["contents"][0].get("uri"),
            "prompts": [p.name for p in prompts.prompts],
        }


async def main() -> int:
    mcpctl = sys.argv[1]
    model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else "passthrough"
    server = ["node", str(SERVER), "stdio"]
    direct = StdioServerParameters(command=server[0], args=server[1:])
    proxied = StdioServerParameters(command=mcpctl, args=["--log", "info", "proxy", "--model", model, "--", *server])

    print(f"$ node {SERVER.name} stdio                      # direct")
    seen_direct = await session_view(direct)
    print(f"$ mcpctl proxy --model {model} -- node ... stdio   # through the proxy\n")
    seen_proxied = await session_view(proxied)

    width = max(len(k) for k in seen_direct)
    for key in seen_direct:
        same = "same" if seen_direct[key] == seen_proxied[key] else "DIFFERENT"
        value = json.dumps(seen_proxied[key], ensure_ascii=False)
        print(f"{key:<{width}}  {same:<9}  {value[:110]}{'...' if len(value) > 110 else ''}")
    identical = seen_direct == seen_proxied
    print(f"\nthrough `{model}` the client saw {'exactly what it sees directly' if identical else 'something else'}.")
    return 0 if identical or model != "passthrough" else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
