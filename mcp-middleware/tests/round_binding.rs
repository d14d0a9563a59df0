//! Input rounds of a hook (`ctx.llm()` asked of a 2026-07-28 client), through the real proxy in
//! front of the scripted upstream: the retry resumes only the tool its round belongs to. A retry
//! that carries the round's `requestState` under another tool's name is refused with invalid
//! params naming the round's tool, and the round stays open for the genuine retry.
#![allow(missing_docs, unreachable_pub)]

mod support;

use mcp_middleware::Proxy;
use mcp_middleware::proxy_model;
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

/// Tool `ask` asks the client's LLM, and answers with what it said.
#[proxy_model]
pub mod asker {
    use mcp_middleware::llm::LlmRequest;
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        if params.name != "ask" {
            return next.run(ctx, params).await;
        }
        let text = match ctx.llm().complete(LlmRequest::new("2 + 2?")).await {
            Ok(answer) => answer.text,
            Err(err) => format!("no answer: {err}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }
}

const ENVELOPE: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"stateless-test","version":"1"}}"#;

fn envelope() -> Value {
    serde_json::from_str(ENVELOPE).expect("envelope is JSON")
}

#[tokio::test]
async fn a_retry_naming_another_tool_is_refused_and_the_round_stays_open() {
    let mut client = Client::connect(Proxy::new(scripted_upstream()).model::<asker::Model>());
    let round = client
        .request(
            "tools/call",
            json!({"name": "ask", "arguments": {}, "_meta": envelope()}),
        )
        .await;
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let key = result["inputRequests"]
        .as_object()
        .and_then(|requests| requests.keys().next().cloned())
        .unwrap_or_default();
    let state = result["requestState"].clone();
    let answer =
        json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"});

    // The round's state and answers, under the name of another tool of the upstream.
    let other = client
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {}, "_meta": envelope(),
                   "requestState": state, "inputResponses": {&key: answer}}),
        )
        .await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    let message = other["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("requestState belongs to tool `ask`, not `echo`"),
        "{other}"
    );

    // The genuine retry still resumes the round.
    let done = client
        .request(
            "tools/call",
            json!({"name": "ask", "arguments": {}, "_meta": envelope(),
                   "requestState": state, "inputResponses": {&key: answer}}),
        )
        .await;
    assert_eq!(Client::texts(&done), ["4"], "{done}");
    client.close().await.expect("closed");
}

/// The same for a round the proxy opens for a 2025-11-25 upstream's own request (its tool asks
/// the client to sample): the 2026-07-28 client's retry must name the tool that asked.
#[tokio::test]
async fn a_bridged_round_of_the_upstream_is_bound_to_its_tool_too() {
    let mut client = Client::connect(Proxy::new(scripted_upstream()));
    let round = client
        .request(
            "tools/call",
            json!({"name": "needs_sampling", "arguments": {}, "_meta": envelope()}),
        )
        .await;
    let result = &round["result"];
    assert_eq!(result["resultType"], "input_required", "{round}");
    let key = result["inputRequests"]
        .as_object()
        .and_then(|requests| requests.keys().next().cloned())
        .unwrap_or_default();
    let state = result["requestState"].clone();
    let answer =
        json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"});

    let other = client
        .request(
            "tools/call",
            json!({"name": "echo_args", "arguments": {}, "_meta": envelope(),
                   "requestState": state, "inputResponses": {&key: answer}}),
        )
        .await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    let message = other["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("requestState belongs to tool `needs_sampling`, not `echo_args`"),
        "{other}"
    );

    let done = client
        .request(
            "tools/call",
            json!({"name": "needs_sampling", "arguments": {}, "_meta": envelope(),
                   "requestState": state, "inputResponses": {&key: answer}}),
        )
        .await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("sampled")),
        "{done}"
    );
    client.close().await.expect("closed");
}
