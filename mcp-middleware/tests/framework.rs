//! The model framework at run time, through the real proxy: a composed model served
//! on a client connection, in front of the scripted upstream as a child process over stdio.
//!
//! The composition under test: `outer` extends `middle` and `toolbox`, so the chain is
//! `outer -> middle -> toolbox -> upstream`.

#![allow(missing_docs, unreachable_pub)]

mod support;

use std::sync::Mutex;

use mcp_middleware::prelude::*;
use mcp_middleware::{Proxy, ProxyError};
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

/// Appends `who` to the `trace` list in a tool call's arguments (the way in).
fn trace(params: &mut CallToolRequestParams, who: &str) {
    let arguments = params.arguments.get_or_insert_with(Default::default);
    let trace = arguments
        .entry("trace")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = trace {
        list.push(json!(who));
    }
}

/// The outermost model: traces calls, hides `secret`, reads `middle`'s state.
#[proxy_model(extends = [middle, toolbox])]
pub mod outer {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        mut params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        super::trace(&mut params, "outer");
        let mut result = next.run(ctx, params).await?;
        result.content.push(ContentBlock::text("out:outer"));
        Ok(result)
    }

    pub async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        let mut listed = next.run(ctx, params).await?;
        listed.tools.retain(|tool| tool.name != "secret");
        Ok(listed)
    }

    pub async fn on_request(
        ctx: &Context,
        mut request: RawRequest,
        next: Next<'_, hooks::Request>,
    ) -> HookResult<serde_json::Value> {
        if request.method == "custom/echo"
            && let Some(serde_json::Value::Object(params)) = &mut request.params
        {
            params.insert("via".into(), "outer".into());
        }
        next.run(ctx, request).await
    }

    pub async fn on_server_notification(
        ctx: &Context,
        mut notification: RawNotification,
        next: Next<'_, hooks::ServerNotification>,
    ) -> HookResult<()> {
        if notification.method == "notifications/message" {
            notification.params =
                Some(serde_json::json!({"level": "info", "data": "seen by outer"}));
        }
        next.run(ctx, notification).await
    }

    pub async fn on_client_notification(
        ctx: &Context,
        mut notification: RawNotification,
        next: Next<'_, hooks::ClientNotification>,
    ) -> HookResult<()> {
        if notification.method == "notifications/custom" {
            notification.params = Some(serde_json::json!({"tagged": "outer"}));
        }
        next.run(ctx, notification).await
    }

    /// How many tool calls `middle` (a parent) counted in this session.
    #[tool]
    pub async fn calls_seen(ctx: &Context) -> HookResult<String> {
        ctx.state(|state: &mut super::middle::State| state.calls.to_string())
    }
}

/// Counts tool calls per session and traces them.
#[proxy_model]
pub mod middle {
    use mcp_middleware::prelude::*;

    /// Tool calls seen in this session.
    #[derive(Default)]
    pub struct State {
        pub calls: u64,
    }

    /// Answers the upstream's `custom/question` itself when it asks the proxy.
    pub async fn on_server_request(
        ctx: &Context,
        request: RawRequest,
        next: Next<'_, hooks::ServerRequest>,
    ) -> HookResult<serde_json::Value> {
        let asks_proxy = request.params.as_ref().is_some_and(|p| p["q"] == "proxy?");
        if request.method == "custom/question" && asks_proxy {
            return Ok(serde_json::json!({"from": "middle"}));
        }
        next.run(ctx, request).await
    }

    pub async fn on_tool_call(
        ctx: &Context,
        mut params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        ctx.state(|state: &mut State| state.calls += 1)?;
        super::trace(&mut params, "middle");
        let mut result = next.run(ctx, params).await?;
        result.content.push(ContentBlock::text("out:middle"));
        Ok(result)
    }
}

/// Synthetic tools, config, content transforms, observers and session hooks.
#[proxy_model]
pub mod toolbox {
    use mcp_middleware::prelude::*;

    /// How the toolbox greets.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(default, deny_unknown_fields)]
    pub struct Config {
        /// The greeting.
        pub greeting: String,
        /// The largest sum `add` returns.
        pub max: u32,
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                greeting: "hello".to_owned(),
                max: 1000,
            }
        }
    }

    /// Set by `on_session_start`.
    #[derive(Default)]
    pub struct State {
        pub started: bool,
    }

    /// Two numbers to add.
    #[derive(Deserialize, JsonSchema)]
    pub struct AddArgs {
        /// The first.
        pub a: i64,
        /// The second.
        pub b: i64,
    }

    /// Adds two numbers.
    #[tool]
    pub async fn add(ctx: &Context, args: AddArgs) -> HookResult<String> {
        let max = i64::from(ctx.config::<Config>()?.max);
        Ok((args.a + args.b).min(max).to_string())
    }

    /// Greets, with the configured greeting.
    #[tool]
    pub async fn greet(ctx: &Context) -> HookResult<String> {
        Ok(ctx.config::<Config>()?.greeting.clone())
    }

    /// Listed by this model, hidden by `outer`.
    #[tool]
    pub async fn secret(_ctx: &Context) -> HookResult<String> {
        Ok("the secret".to_owned())
    }

    /// Panics.
    #[tool]
    pub async fn boom(_ctx: &Context) -> HookResult<String> {
        panic!("boom went the hook")
    }

    /// Asks the upstream directly (outside the chain) and tells the client its tools changed.
    #[tool]
    pub async fn direct(ctx: &Context) -> HookResult<String> {
        let echoed = ctx
            .upstream()
            .request("custom/echo", Some(serde_json::json!({"from": "toolbox"})))
            .await?;
        ctx.downstream().tools_list_changed()?;
        Ok(echoed["echo"]["from"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// The session's id and whether `on_session_start` ran.
    #[tool]
    pub async fn whoami(ctx: &Context) -> HookResult<String> {
        let started = ctx.state(|state: &mut State| state.started)?;
        Ok(format!("{} {started}", ctx.session_id()))
    }

    pub async fn on_session_start(ctx: &Context) -> HookResult<()> {
        ctx.state(|state: &mut State| state.started = true)
    }

    pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
        Ok(content.text.replace("SECRET-TOKEN", "[redacted]"))
    }

    #[observer]
    pub fn record(ctx: &Context, observation: &Observation) {
        let line = format!(
            "{} {} {} {}",
            ctx.session_id(),
            observation.method,
            observation.target.as_deref().unwrap_or("-"),
            observation.outcome.as_str()
        );
        super::OBSERVED.lock().unwrap().push(line);
    }
}

static OBSERVED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn proxy() -> Proxy {
    Proxy::new(scripted_upstream()).model::<outer::Model>()
}

#[tokio::test]
async fn layers_run_outermost_first_on_the_way_in_and_last_on_the_way_out() {
    let mut client = Client::initialized(proxy()).await;
    let answer = client.call_tool("echo_args", json!({})).await;
    let texts = Client::texts(&answer);
    let arguments: Value = serde_json::from_str(&texts[0]).expect("the upstream echoed JSON");
    assert_eq!(arguments["trace"], json!(["outer", "middle"]), "{answer}");
    assert_eq!(texts[1..], ["out:middle", "out:outer"], "{answer}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn synthetic_tools_are_listed_where_their_model_sits_and_answered_there() {
    let mut client = Client::initialized(proxy()).await;
    let listed = client.request("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for expected in ["t", "add", "greet", "boom", "whoami", "calls_seen"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(
        !names.contains(&"secret"),
        "outer filters toolbox's tool: {names:?}"
    );
    let add = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap();
    assert_eq!(add["description"], "Adds two numbers.");
    assert_eq!(add["inputSchema"]["type"], "object");
    assert!(add["inputSchema"]["properties"]["a"].is_object(), "{add}");

    let sum = client.call_tool("add", json!({"a": 2, "b": 3})).await;
    // Answered by toolbox; the outer layers still wrap the result.
    assert_eq!(
        Client::texts(&sum),
        ["5", "out:middle", "out:outer"],
        "{sum}"
    );

    let bad = client.call_tool("add", json!({"a": "two"})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let message = bad["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`add`") && message.contains("a"),
        "{message}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn state_is_fresh_per_session_isolated_between_sessions_and_readable_by_a_child() {
    let mut first = Client::initialized(proxy()).await;
    let mut second = Client::initialized(proxy()).await;
    for _ in 0..3 {
        first.call_tool("echo_args", json!({})).await;
    }
    second.call_tool("echo_args", json!({})).await;
    // `calls_seen` is answered at outer's place in the chain: middle never sees it.
    let seen_first = first.call_tool("calls_seen", json!({})).await;
    let seen_second = second.call_tool("calls_seen", json!({})).await;
    assert_eq!(Client::texts(&seen_first)[0], "3", "{seen_first}");
    assert_eq!(Client::texts(&seen_second)[0], "1", "{seen_second}");
    first.close().await.unwrap();
    second.close().await.unwrap();

    let mut fresh = Client::initialized(proxy()).await;
    let seen = fresh.call_tool("calls_seen", json!({})).await;
    assert_eq!(Client::texts(&seen)[0], "0", "{seen}");
    let whoami = fresh.call_tool("whoami", json!({})).await;
    assert!(
        Client::texts(&whoami)[0].ends_with(" true"),
        "on_session_start ran: {whoami}"
    );
    fresh.close().await.unwrap();
}

#[tokio::test]
async fn config_comes_from_the_embedding_code_and_bad_values_stop_the_start() {
    let mut client =
        Client::initialized(proxy().config("toolbox", json!({"greeting": "ahoy", "max": 4}))).await;
    let greeting = client.call_tool("greet", json!({})).await;
    assert_eq!(Client::texts(&greeting)[0], "ahoy");
    let capped = client.call_tool("add", json!({"a": 3, "b": 3})).await;
    assert_eq!(Client::texts(&capped)[0], "4");
    client.close().await.unwrap();

    let refused = Client::connect(proxy().config("toolbox", json!({"max": "lots"})))
        .close()
        .await;
    match refused {
        Err(ProxyError::Config {
            model,
            field,
            message,
        }) => {
            assert_eq!(model, "toolbox");
            assert_eq!(field.as_deref(), Some("max"));
            assert!(message.contains("invalid type"), "{message}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    let unknown_field = Client::connect(proxy().config("toolbox", json!({"colour": "red"})))
        .close()
        .await
        .unwrap_err();
    assert!(
        unknown_field.to_string().contains("colour"),
        "{unknown_field}"
    );
    let not_in_chain = Client::connect(proxy().config("gate", json!({})))
        .close()
        .await
        .unwrap_err();
    assert!(
        not_in_chain.to_string().contains("no model `gate`"),
        "{not_in_chain}"
    );
}

#[tokio::test]
async fn a_panicking_hook_fails_only_its_own_request() {
    let mut client = Client::initialized(proxy()).await;
    let boom = client.call_tool("boom", json!({})).await;
    assert_eq!(boom["error"]["code"], -32603, "{boom}");
    assert!(
        boom["error"]["message"]
            .as_str()
            .unwrap()
            .contains("boom went the hook"),
        "{boom}"
    );
    let after = client.call_tool("add", json!({"a": 1, "b": 1})).await;
    assert_eq!(
        Client::texts(&after)[0],
        "2",
        "the session goes on: {after}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn generic_request_and_notification_hooks_see_every_message() {
    let mut client = Client::initialized(proxy()).await;
    let echoed = client.request("custom/echo", json!({"x": 1})).await;
    assert_eq!(echoed["result"]["echo"], json!({"x": 1, "via": "outer"}));

    // The upstream logs on every tool call; outer rewrites the log message.
    client.call_tool("echo_args", json!({})).await;
    client.call_tool("plain", json!({})).await;
    let logs: Vec<&Value> = client
        .received
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert!(!logs.is_empty(), "{:?}", client.received);
    assert!(logs.iter().all(|m| m["params"]["data"] == "seen by outer"));

    client
        .notify("notifications/custom", Some(json!({"original": true})))
        .await;
    let echo = loop {
        let message = client.next_message().await;
        if message["method"] == "notifications/custom_echo" {
            break message;
        }
    };
    assert_eq!(echo["params"], json!({"tagged": "outer"}));
    client.close().await.unwrap();
}

#[tokio::test]
async fn request_members_the_typed_params_lack_still_reach_the_upstream() {
    let mut client = Client::initialized(proxy()).await;
    let answer = client
        .request(
            "tools/call",
            json!({"name": "echo_params", "arguments": {}, "task": {"ttl": 60000}}),
        )
        .await;
    let params: Value = serde_json::from_str(&Client::texts(&answer)[0]).unwrap();
    assert_eq!(params["task"], json!({"ttl": 60000}), "{params}");
    assert_eq!(params["arguments"]["trace"], json!(["outer", "middle"]));
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_request_hook_answers_the_upstream_or_passes_the_request_to_the_client() {
    let mut client = Client::initialized(proxy()).await;
    let answered = client.request("ask", json!({"q": "proxy?"})).await;
    assert_eq!(
        answered["result"]["answer"],
        json!({"from": "middle"}),
        "{answered}"
    );

    let id = client.start("ask", json!({"q": "client?"})).await;
    let question = loop {
        let message = client.next_message().await;
        if message["method"] == "custom/question" {
            break message;
        }
    };
    assert_eq!(question["params"], json!({"q": "client?"}));
    client
        .send(&json!({"jsonrpc": "2.0", "id": question["id"], "result": {"from": "client"}}))
        .await;
    let answered = client.answer(id).await;
    assert_eq!(
        answered["result"]["answer"],
        json!({"from": "client"}),
        "{answered}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn hooks_call_the_upstream_directly_and_notify_the_client() {
    let mut client = Client::initialized(proxy()).await;
    let answer = client.call_tool("direct", json!({})).await;
    assert_eq!(Client::texts(&answer)[0], "toolbox", "{answer}");
    assert!(
        client
            .received
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "the list_changed came before the answer: {:?}",
        client.received
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn content_transforms_apply_to_tool_results() {
    let mut client = Client::initialized(proxy()).await;
    let answer = client
        .call_tool("echo_args", json!({"token": "SECRET-TOKEN"}))
        .await;
    let text = &Client::texts(&answer)[0];
    assert!(
        text.contains("[redacted]") && !text.contains("SECRET"),
        "{text}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_hooked_call_cancels_it_upstream_and_observers_see_it() {
    let mut client = Client::initialized(proxy()).await;
    let whoami = client.call_tool("whoami", json!({})).await;
    let session = Client::texts(&whoami)[0]
        .split(' ')
        .next()
        .unwrap()
        .to_owned();

    let id = client
        .start("tools/call", json!({"name": "hang", "arguments": {}}))
        .await;
    // Let the call reach the upstream before cancelling it (hooked requests run in tasks of
    // their own, so a later request may overtake it).
    let mut reached = false;
    for _ in 0..100 {
        let state = client.request("state", json!({})).await;
        if state["result"]["methods"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "tools/call")
        {
            reached = true;
            break;
        }
    }
    assert!(reached, "the hooked call reached the upstream");
    client
        .notify(
            "notifications/cancelled",
            Some(json!({"requestId": id, "reason": "test"})),
        )
        .await;
    let mut cancelled = Vec::new();
    for _ in 0..50 {
        let state = client.request("state", json!({})).await;
        cancelled = state["result"]["cancelled"].as_array().unwrap().clone();
        if !cancelled.is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(cancelled.len(), 1, "the upstream was told: {cancelled:?}");

    let rejected = client.call_tool("add", json!({"a": "x"})).await;
    assert!(rejected.get("error").is_some());
    client.close().await.unwrap();

    let observed: Vec<String> = OBSERVED
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.starts_with(&format!("{session} ")))
        .cloned()
        .collect();
    let has = |needle: &str| observed.iter().any(|line| line.ends_with(needle));
    assert!(has("tools/call whoami ok"), "{observed:?}");
    assert!(has("tools/call hang cancelled"), "{observed:?}");
    assert!(has("tools/call add rejected"), "{observed:?}");
    assert!(has("state - ok"), "every request is observed: {observed:?}");
}

#[tokio::test]
async fn a_hooked_call_the_upstream_never_answers_times_out_and_is_cancelled_upstream() {
    let mut options = mcp_middleware::SessionOptions::default();
    // The timeout covers `initialize` too, which waits for the Python upstream to start: 1 s
    // was too short for that on a loaded machine (load above ~13), 5 s is not.
    options.request_timeout = Some(std::time::Duration::from_secs(5));
    let mut client = Client::initialized(proxy().options(options)).await;
    let answer = client.call_tool("hang", json!({})).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tools/call"),
        "{answer}"
    );
    let state = client.request("state", json!({})).await;
    assert_eq!(
        state["result"]["cancelled"].as_array().map(Vec::len),
        Some(1),
        "the upstream was told: {state}"
    );
    client.close().await.unwrap();
}
