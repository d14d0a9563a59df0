//! An upstream over streamable HTTP (SPEC T3): the proxy as an HTTP client of a real
//! streamable HTTP server (the proxy's own HTTP front, in front of the scripted stdio upstream),
//! with a client on the stdio side. Calls, progress, server-to-client requests, an expired
//! upstream session initialized again, an unreachable server.

#![allow(missing_docs, unreachable_pub)]

mod support;

use std::net::SocketAddr;

use mcp_middleware::Proxy;
use mcp_middleware::http::{HttpOptions, HttpServer};
use mcp_middleware::upstream::HttpUpstream;
use serde_json::json;
use support::{Client, scripted_upstream};

async fn front(listen: SocketAddr) -> HttpServer {
    Proxy::new(scripted_upstream().env("SCRIPTED_NAME", "over-http"))
        .serve_http(HttpOptions::default().listen(listen))
        .await
        .expect("the upstream's HTTP front starts")
}

#[tokio::test]
async fn calls_progress_and_server_requests_cross_an_http_upstream() {
    let server = front("127.0.0.1:0".parse().unwrap()).await;
    let upstream = HttpUpstream::new(server.url()).bearer("not-checked-here");
    let mut client = Client::initialized(Proxy::new(upstream)).await;

    let listed = client.request("tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"][0]["name"], "t", "{listed}");
    let called = client.call_tool("t", json!({})).await;
    assert_eq!(
        Client::texts(&called),
        ["called t by over-http"],
        "{called}"
    );

    let progress = client
        .request("progress", json!({"_meta": {"progressToken": "p-1"}}))
        .await;
    assert_eq!(progress["result"]["done"], true, "{progress}");
    let steps: Vec<_> = client
        .received
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progressToken"].clone())
        .collect();
    assert_eq!(
        steps,
        [json!("p-1"), json!("p-1"), json!("p-1")],
        "tokens mapped back"
    );

    let id = client.start("ask", json!({"q": "over http?"})).await;
    let question = loop {
        let message = client.next_message().await;
        if message["method"] == "custom/question" {
            break message;
        }
    };
    client
        .send(&json!({"jsonrpc": "2.0", "id": question["id"], "result": {"yes": true}}))
        .await;
    let answered = client.answer(id).await;
    assert_eq!(
        answered["result"]["answer"],
        json!({"yes": true}),
        "{answered}"
    );
    client.close().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn an_expired_upstream_session_is_initialized_again_unseen() {
    let first = front("127.0.0.1:0".parse().unwrap()).await;
    let addr = first.local_addr();
    let mut client = Client::initialized(Proxy::new(HttpUpstream::new(first.url()))).await;
    let before = client.call_tool("t", json!({})).await;
    assert_eq!(Client::texts(&before), ["called t by over-http"]);

    // The server restarts: the session the proxy holds is unknown to the new one (404).
    first.shutdown().await;
    let second = front(addr).await;
    let after = client.call_tool("t", json!({})).await;
    assert_eq!(Client::texts(&after), ["called t by over-http"], "{after}");
    let state = client.request("state", json!({})).await;
    assert_eq!(
        state["result"]["initializes"], 1,
        "the new server was initialized: {state}"
    );
    assert_eq!(
        state["result"]["initialized"], 1,
        "and told `initialized`: {state}"
    );
    client.close().await.unwrap();
    second.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_server_fails_each_request_clearly() {
    let server = front("127.0.0.1:0".parse().unwrap()).await;
    let url = server.url().to_owned();
    let mut client = Client::initialized(Proxy::new(HttpUpstream::new(&url))).await;
    server.shutdown().await;
    let failed = client.call_tool("t", json!({})).await;
    assert_eq!(failed["error"]["code"], -32001, "{failed}");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&url) && message.contains("tools/call"),
        "{message}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_malformed_url_or_ca_file_is_refused_at_start() {
    let refused = Client::connect(Proxy::new(HttpUpstream::new("example.com/mcp")))
        .close()
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("http://"), "{refused}");
    let refused = Client::connect(Proxy::new(
        HttpUpstream::new("https://example.com/mcp").ca_file("/nonexistent/ca.pem"),
    ))
    .close()
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("/nonexistent/ca.pem"),
        "{refused}"
    );
}
