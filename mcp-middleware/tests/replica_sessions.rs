//! A session restored on another replica (issue 15): two `Proxy::serve_http` fronts sharing one
//! real `redis-server` (a free loopback port; scripts/setup-interop installs it), driven by a
//! raw HTTP client. A restored session does not run `on_session_start` again (its model state
//! comes from the store), and `ctx.session_id()` is the same on both replicas: derived from the
//! `Mcp-Session-Id`, not the header itself, not a per-process number.

#![cfg(feature = "redis")]
#![allow(missing_docs, unreachable_pub)]

#[path = "support/http_client.rs"]
mod http_client;
#[path = "support/redis_server.rs"]
mod redis_server;
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use http_client::{Conn, call, start_session};
use mcp_middleware::Proxy;
use mcp_middleware::http::{HttpOptions, HttpServer};
use mcp_middleware::prelude::*;
use mcp_middleware::shared_store::SharedStore;
use redis_server::Redis;
use serde_json::json;

/// How many times `on_session_start` ran, in this process (both replicas are in it).
static STARTS: AtomicUsize = AtomicUsize::new(0);

/// Counts its session starts and tells who it is.
#[proxy_model]
pub mod starts {
    use mcp_middleware::prelude::*;

    /// Set by `on_session_start`; travels with the session.
    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    pub struct State {
        pub started: bool,
    }

    pub async fn on_session_start(ctx: &Context) -> HookResult<()> {
        super::STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ctx.state(|state: &mut State| state.started = true)
    }

    /// The session's id as hooks see it, and whether `on_session_start` set the state.
    #[tool]
    pub async fn whoami(ctx: &Context) -> HookResult<String> {
        let started = ctx.state(|state: &mut State| state.started)?;
        Ok(format!("{} {started}", ctx.session_id()))
    }
}

async fn replica(redis: &Redis) -> HttpServer {
    let store = SharedStore::redis(&redis.url, "replica-sessions")
        .await
        .expect("redis answers");
    let options = HttpOptions::default()
        .listen("127.0.0.1:0".parse().expect("an address"))
        .shared_store(store);
    Proxy::new(support::scripted_upstream())
        .model::<starts::Model>()
        .serve_http(options)
        .await
        .expect("serve_http")
}

async fn whoami(conn: &mut Conn, session: &str, id: u64) -> String {
    let messages = call(
        conn,
        session,
        id,
        "tools/call",
        json!({"name": "whoami", "arguments": {}}),
    )
    .await;
    let answer = messages.last().expect("an answer");
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_session_keeps_its_start_and_its_id() {
    let redis = Redis::start().await;
    let (one, two) = (replica(&redis).await, replica(&redis).await);
    let mut first = Conn::connect(one.local_addr()).await;
    let session = start_session(&mut first, "replica-sessions").await;
    let created = whoami(&mut first, &session, 1).await;
    let mut second = Conn::connect(two.local_addr()).await;
    let restored = whoami(&mut second, &session, 2).await;
    assert_eq!(
        STARTS.load(Ordering::SeqCst),
        1,
        "on_session_start ran on the replica that created the session only"
    );
    assert!(created.ends_with(" true"), "{created}");
    assert_eq!(
        restored, created,
        "the same id on both replicas, and the state the start hook set came from the store"
    );
    let id = created.split(' ').next().unwrap_or_default();
    assert!(id.starts_with("http-"), "{id}");
    assert!(
        !id.contains(&session) && !id.contains(&session[..8]),
        "the hooks' id does not give the Mcp-Session-Id away: {id}"
    );
    // A second session gets another id.
    let other = start_session(&mut first, "replica-sessions").await;
    assert_ne!(whoami(&mut first, &other, 3).await, created);
    one.shutdown().await;
    two.shutdown().await;
}
