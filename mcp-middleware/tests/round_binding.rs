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

/// Calls `tool` (which opens an input round), retries with the round's state under `other`
/// (refused with invalid params naming `tool`), then retries under `tool` itself: the round was
/// still open. The genuine retry's answer.
async fn refused_under_another_name(client: &mut Client, tool: &str, other: &str) -> Value {
    let round = client
        .request(
            "tools/call",
            json!({"name": tool, "arguments": {}, "_meta": envelope()}),
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
    let retry = |name: &str| {
        json!({"name": name, "arguments": {}, "_meta": envelope(),
               "requestState": state, "inputResponses": {&key: answer}})
    };

    let refused = client.request("tools/call", retry(other)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "requestState belongs to tool `{tool}`, not `{other}`"
        )),
        "{refused}"
    );
    client.request("tools/call", retry(tool)).await
}

#[tokio::test]
async fn a_retry_naming_another_tool_is_refused_and_the_round_stays_open() {
    let mut client = Client::connect(Proxy::new(scripted_upstream()).model::<asker::Model>());
    let done = refused_under_another_name(&mut client, "ask", "echo").await;
    assert_eq!(Client::texts(&done), ["4"], "{done}");
    client.close().await.expect("closed");
}

/// The same for a round the proxy opens for a 2025-11-25 upstream's own request (its tool asks
/// the client to sample): the 2026-07-28 client's retry must name the tool that asked.
#[tokio::test]
async fn a_bridged_round_of_the_upstream_is_bound_to_its_tool_too() {
    let mut client = Client::connect(Proxy::new(scripted_upstream()));
    let done = refused_under_another_name(&mut client, "needs_sampling", "echo_args").await;
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("sampled")),
        "{done}"
    );
    client.close().await.expect("closed");
}
