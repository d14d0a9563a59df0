//! `codemode` composed with other models, through the real proxy in front of the content
//! upstream (`tests/fixtures/content_upstream.py`, a child process over stdio): the synthetic
//! tools of models below it are the `proxy` namespace, every inner call reaches the observers
//! and passes the models below (paginate cuts its result), and code mode works behind `gate`.
#![cfg(feature = "codemode")]
#![allow(missing_docs, unreachable_pub)]

#[path = "../../mcp-middleware/tests/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::sync::Mutex;

use mcp_middleware::Proxy;
use mcp_middleware::prelude::*;
use mcp_middleware::upstream::StdioServer;
use serde_json::{Value, json};
use support::Client;

/// What the recorder observed: method and target of every finished request.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records every request it observes.
#[proxy_model]
pub mod recorder {
    use mcp_middleware::prelude::*;

    #[observer]
    pub fn record(_ctx: &Context, observation: &Observation) {
        let line = format!(
            "{} {} {}",
            observation.method,
            observation.target.as_deref().unwrap_or("-"),
            observation.outcome.as_str()
        );
        if let Ok(mut seen) = super::SEEN.lock() {
            seen.push(line);
        }
    }
}

/// Code mode over paginated results, observed.
#[proxy_model(extends = [mcp_middleware_models::codemode, mcp_middleware_models::paginate, recorder])]
pub mod coded {}

/// Code mode behind the gate: `begin_session` first.
#[proxy_model(
    extends = [mcp_middleware_models::gate, mcp_middleware_models::codemode],
    chain = [on_tools_list, on_tool_call]
)]
pub mod gated_code {}

fn content_upstream() -> StdioServer {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/content_upstream.py");
    StdioServer::new("python3").arg(script)
}

fn names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn first_text(answer: &Value) -> String {
    Client::texts(answer).first().cloned().unwrap_or_default()
}

#[tokio::test]
async fn synthetic_tools_below_are_the_proxy_namespace_and_observers_see_inner_calls() {
    let proxy = Proxy::new(content_upstream())
        .model::<coded::Model>()
        .config("paginate", json!({"pageBytes": 1024}));
    let mut client = Client::initialized(proxy).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(
        names(&listed),
        ["overview", "search_tools", "inspect", "execute"]
    );

    let code = r#"
        const first: string = await upstream.plain_text({ bytes: 5000 });
        const cursor = /"cursor": "([^"]+)"/.exec(first)?.[1];
        const second: string = await proxy.read_page({ cursor });
        return { first: first.length, hasFooter: first.includes("read_page"), second: second.length };
    "#;
    let answer = client.call_tool("execute", json!({"code": code})).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let value: Value = serde_json::from_str(&first_text(&answer)).expect("JSON result");
    assert_eq!(
        value["hasFooter"], true,
        "paginate, below code mode, cut the inner result: {value}"
    );
    assert!(value["second"].as_u64().unwrap_or(0) > 0, "{value}");

    let hidden = client
        .call_tool(
            "execute",
            json!({"code": "return await upstream.nope({});"}),
        )
        .await;
    assert_eq!(hidden["result"]["isError"], true);
    client.close().await.expect("closed");

    let seen = SEEN.lock().map(|seen| seen.clone()).unwrap_or_default();
    for expected in [
        "tools/call plain_text ok",
        "tools/call read_page ok",
        "tools/call execute ok",
        // Refused before anything reached the upstream: the library calls that `rejected`.
        "tools/call execute rejected",
    ] {
        assert!(
            seen.iter().any(|line| line == expected),
            "{expected:?} not in {seen:?}"
        );
    }
}

#[tokio::test]
async fn code_mode_behind_the_gate_opens_with_begin_session() {
    let mut client =
        Client::initialized(Proxy::new(content_upstream()).model::<gated_code::Model>()).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(names(&listed), ["begin_session"]);
    let refused = client
        .call_tool("execute", json!({"code": "return 1;"}))
        .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let opened = client
        .call_tool("begin_session", json!({"intent": "run some code"}))
        .await;
    assert_ne!(opened["result"]["isError"], true, "{opened}");
    let listed = client.request("tools/list", json!({})).await;
    let listed = names(&listed);
    assert!(
        ["overview", "search_tools", "inspect", "execute"]
            .iter()
            .all(|t| listed.contains(&(*t).to_owned())),
        "{listed:?}"
    );
    let answer = client
        .call_tool(
            "execute",
            json!({"code": "return await upstream.echo_text({ text: 'gated' });"}),
        )
        .await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    client.close().await.expect("closed");
}
