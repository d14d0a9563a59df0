//! Several servers served as one (SPEC T4): namespaced tools, routing, a server that does not
//! start, a server that dies and comes back, `${env:VAR}` resolved only at start.

#![allow(missing_docs, unreachable_pub)]

mod support;

use mcp_middleware::Proxy;
use mcp_middleware::upstream::{ServerSet, StdioServer};
use serde_json::{Value, json};
use support::{Client, scripted_upstream};

fn named(name: &str) -> StdioServer {
    scripted_upstream().env("SCRIPTED_NAME", name)
}

fn tool_names(listed: &Value) -> Vec<String> {
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

#[tokio::test]
async fn tools_are_namespaced_and_calls_reach_their_server() {
    let set = ServerSet::new()
        .server("alpha", named("alpha"))
        .server("beta", named("beta"));
    let mut client = Client::initialized(Proxy::new(set)).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["alpha__t", "beta__t"], "{listed}");
    let tool = &listed["result"]["tools"][0];
    assert_eq!(
        tool["execution"],
        json!({"taskSupport": "optional"}),
        "members pass through"
    );

    let answer = client.call_tool("beta__t", json!({})).await;
    assert_eq!(Client::texts(&answer), ["called t by beta"], "{answer}");
    let answer = client.call_tool("alpha__t", json!({})).await;
    assert_eq!(Client::texts(&answer), ["called t by alpha"], "{answer}");

    let unknown = client.call_tool("gamma__t", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let message = unknown["error"]["message"].as_str().unwrap();
    assert!(message.contains("alpha, beta"), "{message}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_separator_is_configurable_and_initialize_merges_the_servers() {
    let set = ServerSet::new()
        .server("a", named("a"))
        .server("b", named("b"))
        .separator(".");
    let mut client = Client::connect(Proxy::new(set));
    let init = client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
    let result = &init["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(
        result["serverInfo"]["name"],
        "scripted-upstream + scripted-upstream"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert!(
        result["instructions"]
            .as_str()
            .unwrap()
            .contains("Server `a`"),
        "{result}"
    );
    client.notify("notifications/initialized", None).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["a.t", "b.t"]);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_does_not_start_is_reported_and_the_others_work() {
    let status =
        std::env::temp_dir().join(format!("server-set-status-{}.json", std::process::id()));
    let set = ServerSet::new()
        .server("broken", StdioServer::new("/nonexistent/mcp-server"))
        .server("good", named("good"))
        .status_file(&status);
    let mut client = Client::initialized(Proxy::new(set)).await;
    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(tool_names(&listed), ["good__t"], "{listed}");
    let answer = client.call_tool("good__t", json!({})).await;
    assert_eq!(Client::texts(&answer), ["called t by good"]);
    let broken = client.call_tool("broken__t", json!({})).await;
    assert_eq!(broken["error"]["code"], -32001, "{broken}");
    assert!(
        broken["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`broken`"),
        "{broken}"
    );
    let states: Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert_eq!(states[0]["name"], "broken");
    assert_eq!(states[0]["state"], "down");
    assert!(
        states[0]["reason"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/mcp-server")
    );
    assert_eq!(states[1]["state"], "running");
    client.close().await.unwrap();
    let _ = std::fs::remove_file(status);
}

#[tokio::test]
async fn a_server_that_dies_fails_its_call_and_starts_again_on_the_next() {
    let set = ServerSet::new()
        .server("a", named("a"))
        .server("b", named("b"));
    let mut client = Client::initialized(Proxy::new(set)).await;
    let died = client.call_tool("b__die", json!({})).await;
    assert_eq!(died["error"]["code"], -32001, "{died}");
    let other = client.call_tool("a__t", json!({})).await;
    assert_eq!(
        Client::texts(&other),
        ["called t by a"],
        "the other server is unharmed"
    );
    let again = client.call_tool("b__t", json!({})).await;
    assert_eq!(
        Client::texts(&again),
        ["called t by b"],
        "b started again: {again}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn env_references_are_resolved_at_start_and_shown_as_written() {
    let server = scripted_upstream().env("SCRIPTED_NAME", "${env:HOME}");
    assert!(server.to_string().starts_with("python3 "));
    let set = ServerSet::new()
        .server("home", server)
        .server("plain", named("plain"));
    // Descriptions show the reference, never the value.
    assert!(format!("{set:?}").contains("${env:HOME}"));
    let mut client = Client::initialized(Proxy::new(set)).await;
    let answer = client.call_tool("home__t", json!({})).await;
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(Client::texts(&answer), [format!("called t by {home}")]);

    let missing = ServerSet::new()
        .server(
            "x",
            scripted_upstream().env("SCRIPTED_NAME", "${env:MCP_MIDDLEWARE_SURELY_UNSET}"),
        )
        .server("plain", named("plain"));
    let mut client2 = Client::initialized(Proxy::new(missing)).await;
    let refused = client2.call_tool("x__t", json!({})).await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("MCP_MIDDLEWARE_SURELY_UNSET"), "{message}");
    client.close().await.unwrap();
    client2.close().await.unwrap();
}
