"""Fixture server for test_admin_ui.py: tools whose input schemas are valid JSON objects but
odd inside, where a form builder expects an object or an array and finds another JSON type
(`"enum": "fast"`, properties that are a list or a string, `required` that is a string, a
type that is a number). Raw JSON-RPC over stdio, so no SDK tidies the schemas on the way.

Run: `python odd_schema_server.py` (stdio).
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": "fast_mode", "description": "enum is a string",
     "inputSchema": {"type": "object", "properties": {"mode": {"type": "string", "enum": "fast"}}}},
    {"name": "listed_properties", "description": "properties is a list",
     "inputSchema": {"type": "object", "properties": ["a", "b"], "required": "a"}},
    {"name": "string_property", "description": "a property that is a string",
     "inputSchema": {"type": "object", "properties": {"x": "string", "y": None, "z": 5}}},
    {"name": "numbered_type", "description": "type is a number, enum holds objects",
     "inputSchema": {"type": "object", "properties": {"n": {"type": 5, "enum": [{"a": 1}, None]},
                                                      "t": {"type": [None, 3]}}}},
    {"name": "null_properties", "description": "properties is null",
     "inputSchema": {"type": "object", "properties": None, "required": [1, None]}},
    {"name": "plain", "description": "an ordinary tool",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue
        method, msg_id = message["method"], message["id"]
        params = message.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "odd-schemas", "version": "1.0.0"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            arguments = params.get("arguments") or {}
            result = {"content": [{"type": "text", "text": f"{params.get('name')} got {json.dumps(arguments, sort_keys=True)}"}]}
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": msg_id, "result": result})


if __name__ == "__main__":
    main()
