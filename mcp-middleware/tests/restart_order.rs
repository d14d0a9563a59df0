//! What waits for a restarted upstream goes to it in the order it came: a
//! hook's request and a raw client request both wait in the session's one `Replay` while the
//! replayed `initialize` is unanswered, and after it the hook's request, held first, goes
//! first. The upstream is the scripted one (a child process over stdio), killed mid-session
//! by a hook; a FIFO (`SCRIPTED_INIT_GATE`) tells the test when the restarted process has the
//! replayed `initialize` and holds its answer until the test lets it go.

#![allow(missing_docs, unreachable_pub)]

mod support;

use std::time::Duration;

use mcp_middleware::{Proxy, SessionOptions, proxy_model};
use serde_json::{Value, json};
use support::{Client, Lifeline, scripted_upstream};

/// Kills the upstream first (`die`, through `ctx.upstream()`), then calls the tool: the tool
/// call is the hook's request that waits for the restarted upstream.
#[proxy_model]
pub mod killer {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        // Never answered: the upstream exits, and the hook gets an error it does not need.
        let _ = ctx.upstream().request("die", None).await;
        next.run(ctx, params).await
    }
}

/// The largest message the proxy takes here: a longer line is refused at once, even while
/// the upstream starts, which tells the test that what it sent before has reached the session.
const MAX: usize = 4096;

#[tokio::test]
async fn a_hooked_and_a_raw_request_held_for_a_restart_go_in_the_order_they_came() {
    let gate = Lifeline::new("restart-order");
    let log = gate.path.with_extension("log");
    let mut options = SessionOptions::default();
    options.max_message_bytes = MAX;
    let upstream = scripted_upstream()
        .env("SCRIPTED_INIT_GATE", gate.path.display().to_string())
        .env("SCRIPTED_LOG", log.display().to_string());
    let proxy = Proxy::new(upstream)
        .options(options)
        .model::<killer::Model>();
    let mut client = Client::initialized(proxy).await;

    // The hook kills the upstream and asks for the tool; its request starts the upstream again
    // and waits for the replayed initialize, which the restarted process holds on the gate.
    let hooked = client
        .start("tools/call", json!({"name": "t", "arguments": {}}))
        .await;
    // Opening a FIFO for writing blocks until its reader opens it: on a thread of its own, so
    // a test that fails here does not wait for it on its way out.
    let path = gate.path.clone();
    let (sender, opened) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = sender.send(std::fs::OpenOptions::new().write(true).open(path));
    });
    let writer = tokio::time::timeout(Duration::from_secs(10), opened)
        .await
        .expect("the restarted upstream got the replayed initialize")
        .expect("the opener reported")
        .expect("the gate opens");

    // A raw request now waits behind the hook's; the refused long line after it proves the
    // session has read it.
    let raw = client.start("custom/echo", json!({"n": 2})).await;
    client
        .send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":"long","method":"custom/echo","params":{{"pad":"{}"}}}}"#,
            "x".repeat(MAX)
        ))
        .await;
    let refused = client.next_message().await;
    assert_eq!(refused["id"], "long", "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");

    drop(writer);
    let mut answers = [Value::Null, Value::Null];
    while answers.iter().any(Value::is_null) {
        let message = client.next_message().await;
        if message.get("method").is_some() {
            continue;
        }
        if message["id"] == json!(hooked) {
            answers[0] = message;
        } else if message["id"] == json!(raw) {
            answers[1] = message;
        }
    }
    let [tool, echo] = answers;
    assert!(
        tool["result"]["content"].is_array(),
        "the hooked call is answered: {tool}"
    );
    assert_eq!(
        echo["result"]["echo"]["n"], 2,
        "the raw request is answered: {echo}"
    );

    let received: Vec<Value> = std::fs::read_to_string(&log)
        .expect("the upstream's log")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON log line"))
        .collect();
    let restarted = received
        .iter()
        .rposition(|entry| entry["method"] == "initialize")
        .expect("a replayed initialize");
    let after: Vec<&str> = received[restarted..]
        .iter()
        .filter_map(|entry| entry["method"].as_str())
        .collect();
    assert_eq!(
        after,
        [
            "initialize",
            "notifications/initialized",
            "tools/call",
            "custom/echo"
        ],
        "the handshake first, then what waited in the order it came: {received:?}"
    );
    client.close().await.unwrap();
}
