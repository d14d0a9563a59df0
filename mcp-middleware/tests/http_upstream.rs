//! An upstream over streamable HTTP: the proxy as an HTTP client of a real
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

/// `tests/fixtures/sse_resume_upstream.py`: a streamable HTTP server whose SSE streams break
/// mid-way and expect to be resumed. Killed when dropped.
struct BreakingServer {
    child: std::process::Child,
    url: String,
}

impl BreakingServer {
    fn start() -> Self {
        use std::io::BufRead;
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/sse_resume_upstream.py");
        let mut child = std::process::Command::new("python3")
            .arg("-u")
            .arg(script)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the fixture");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        let read = std::io::BufReader::new(stdout).read_line(&mut line);
        let Some(port) = line.trim().strip_prefix("PORT ").filter(|_| read.is_ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the fixture did not say its port: {line:?}");
        };
        let url = format!("http://127.0.0.1:{port}/mcp");
        Self { child, url }
    }
}

impl Drop for BreakingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_broken_event_stream_is_resumed_with_its_last_event_id() {
    let server = BreakingServer::start();
    let mut client = Client::initialized(Proxy::new(HttpUpstream::new(&server.url))).await;

    // The call's stream breaks after its progress; the answer comes on the resumed stream.
    let called = client
        .request(
            "tools/call",
            json!({"name": "drop", "arguments": {}, "_meta": {"progressToken": "p-9"}}),
        )
        .await;
    assert_eq!(Client::texts(&called), ["resumed"], "{called}");
    assert!(
        client
            .received
            .iter()
            .any(|m| m["method"] == "notifications/progress"
                && m["params"]["progressToken"] == "p-9"),
        "the progress sent before the break arrived: {:?}",
        client.received
    );

    // A stream without event ids cannot be resumed: the request fails, clearly.
    let failed = client.call_tool("noid", json!({})).await;
    assert_eq!(failed["error"]["code"], -32001, "{failed}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no event id"), "{message}");

    // The GET stream ended after g1 and was reconnected from there: g2 arrives too.
    let logged = |client: &Client| -> Vec<String> {
        client
            .received
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .filter_map(|m| m["params"]["data"].as_str().map(str::to_owned))
            .collect()
    };
    while !logged(&client).contains(&"g2".to_owned()) {
        let message = client.next_message().await;
        client.received.push(message);
    }
    let logged = logged(&client);
    assert!(logged.contains(&"g1".to_owned()), "{logged:?}");

    let state = client.call_tool("state", json!({})).await;
    let seen: Vec<String> = Client::texts(&state)
        .first()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| panic!("the fixture's state: {state}"));
    assert!(seen.contains(&"e1".to_owned()), "{seen:?}");
    assert!(seen.contains(&"g1".to_owned()), "{seen:?}");
    client.close().await.unwrap();
    drop(server);
}
