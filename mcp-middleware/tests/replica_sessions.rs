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

/// What the upstream a replica runs for `session` was told (the scripted upstream's `state`).
async fn upstream_state(conn: &mut Conn, session: &str, id: u64) -> serde_json::Value {
    let messages = call(conn, session, id, "state", json!({})).await;
    let answer = messages.last().expect("an answer");
    answer["result"].clone()
}

/// The last level the upstream was told and the URIs it is subscribed to now.
fn told(state: &serde_json::Value) -> (Option<String>, Vec<String>) {
    let level = state["log_levels"]
        .as_array()
        .and_then(|levels| levels.last())
        .and_then(|level| level.as_str())
        .map(str::to_owned);
    let subscribed = state["subscribed"]
        .as_array()
        .map(|uris| {
            uris.iter()
                .filter_map(|uri| uri.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (level, subscribed)
}

const LEVELS: [&str; 4] = ["debug", "info", "warning", "error"];

/// One session, two replicas: the client sets the log level through one while it subscribes
/// and unsubscribes through the other, at once, many rounds, the last change of each side
/// sent at the same moment. A third replica that restores the session afterwards replays the
/// last level and exactly the subscriptions the client holds, and the two replicas' own
/// upstreams end up told both (each heard the other's changes through the store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_handshake_changes_on_two_replicas_all_reach_the_shared_store() {
    const ROUNDS: usize = 30;
    let redis = Redis::start().await;
    let (one, two, three) = (
        replica(&redis).await,
        replica(&redis).await,
        replica(&redis).await,
    );
    let mut first = Conn::connect(one.local_addr()).await;
    let session = start_session(&mut first, "replica-sessions").await;
    let mut second = Conn::connect(two.local_addr()).await;
    // The second replica runs the session (and an upstream for it) before the race.
    upstream_state(&mut second, &session, 1).await;
    let uri = |i: usize| format!("mem://r{}", i % 7);
    // What the client holds at the end: the last level, and the subscriptions its
    // subscribes and unsubscribes (every third one) leave.
    let level = LEVELS[(ROUNDS - 1) % LEVELS.len()];
    let mut expected = std::collections::BTreeSet::new();
    for i in 0..ROUNDS {
        if i % 3 == 2 {
            expected.remove(&uri(i));
        } else {
            expected.insert(uri(i));
        }
    }
    let expected: Vec<String> = expected.into_iter().collect();
    let last = tokio::sync::Barrier::new(2);
    let levels = async {
        for i in 0..ROUNDS {
            if i == ROUNDS - 1 {
                last.wait().await;
            }
            let params = json!({ "level": LEVELS[i % LEVELS.len()] });
            let id = 100 + i as u64;
            call(&mut first, &session, id, "logging/setLevel", params).await;
        }
    };
    let subscriptions = async {
        for i in 0..ROUNDS {
            if i == ROUNDS - 1 {
                last.wait().await;
            }
            let method = if i % 3 == 2 {
                "resources/unsubscribe"
            } else {
                "resources/subscribe"
            };
            let id = 100 + i as u64;
            call(&mut second, &session, id, method, json!({ "uri": uri(i) })).await;
        }
    };
    tokio::join!(levels, subscriptions);
    let mut third = Conn::connect(three.local_addr()).await;
    let restored = upstream_state(&mut third, &session, 1000).await;
    assert_eq!(
        told(&restored),
        (Some(level.to_owned()), expected.clone()),
        "the restoring replica's upstream was replayed the last level and exactly the subscriptions: {restored}"
    );
    assert_eq!(
        restored["log_levels"],
        json!([level]),
        "one level replayed"
    );
    // Both racing replicas' upstreams end up told both sides' changes (through the store's
    // announcements, which take a moment: waited for, 20 s at most).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    for (n, conn) in [&mut first, &mut second].into_iter().enumerate() {
        let mut id = 2000 + 100 * n as u64;
        loop {
            let state = upstream_state(conn, &session, id).await;
            if told(&state) == (Some(level.to_owned()), expected.clone()) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "replica {n}'s upstream never got both sides' last changes: {state}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            id += 1;
        }
    }
    one.shutdown().await;
    two.shutdown().await;
    three.shutdown().await;
}
