//! The reverse era bridge on the wire: a 2025-11-25 client (JSON-RPC over `mcpctl proxy`'s
//! stdio) in front of a 2026-07-28-only upstream (the official Python SDK's 2026-07-28 loop,
//! `tests/interop/servers/modern_server.py`). The interop suite (`test_reverse_bridge.py`)
//! drives the same with the official Python client; this checks the exact JSON the old client
//! gets.

mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::Client;

/// The interop suite's Python (it has the `mcp` SDK the fixture server runs on).
fn modern_upstream() -> Vec<String> {
    let interop = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop");
    let python = interop.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup-interop first (the fixture server needs the Python MCP SDK)",
        python.display()
    );
    vec![
        python.display().to_string(),
        interop
            .join("servers/modern_server.py")
            .display()
            .to_string(),
    ]
}

fn legacy_client() -> Client {
    let mut client = Client::start(&["--model", "passthrough"], &modern_upstream(), &[]);
    let init = client.request(
        json!(0),
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "wire-test", "version": "1"},
        }),
    );
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(
        result["serverInfo"]["name"], "interop-dual-server",
        "{init}"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{init}");
    assert!(result["capabilities"]["logging"].is_object(), "{init}");
    assert!(result.get("resultType").is_none(), "{init}");
    client.notify("notifications/initialized", json!({}));
    client
}

#[test]
fn a_2025_client_gets_plain_results_and_ping_from_a_2026_only_server() {
    let mut client = legacy_client();
    let echo = client.request(
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "wire"}}),
    );
    let result = &echo["result"];
    assert_eq!(result["content"][0]["text"], "echo: wire", "{echo}");
    for field in ["resultType", "ttlMs", "cacheScope"] {
        assert!(result.get(field).is_none(), "{field} in {echo}");
    }
    let listed = client.request(json!(2), "tools/list", json!({}));
    assert!(listed["result"].get("ttlMs").is_none(), "{listed}");
    assert_eq!(
        client.request(json!(3), "ping", json!({})),
        json!({"jsonrpc": "2.0", "id": 3, "result": {}})
    );
    // An upstream error reaches the client as the server sent it.
    let missing = client.request(
        json!(4),
        "resources/read",
        json!({"uri": "dual://no-such-resource"}),
    );
    assert!(missing["error"]["code"].is_i64(), "{missing}");
    assert!(missing.get("result").is_none(), "{missing}");
    assert!(client.close().success());
}

#[test]
fn an_input_round_becomes_a_real_elicitation_request() {
    let mut client = legacy_client();
    client.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "greet", "arguments": {}}}));
    let asked: Value = loop {
        let message = client.recv();
        if message["method"] == "elicitation/create" {
            break message;
        }
        client.inbox.push(message);
    };
    assert_eq!(asked["params"]["message"], "What is your name?", "{asked}");
    client.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"name": "Ada"}}}));
    let done = client.request_response(json!(7));
    assert_eq!(done["result"]["content"][0]["text"], "hello Ada", "{done}");
    assert!(done["result"].get("resultType").is_none(), "{done}");
    assert!(client.close().success());
}
