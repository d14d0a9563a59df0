//! A session restored on another replica: two `Proxy::serve_http` fronts sharing one
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

use http_client::{Conn, WAIT, call, start_session};
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

/// A replica of project `namespace` on `redis`, the scripted upstream behind `proxy`'s models.
async fn replica_of(
    redis: &Redis,
    namespace: &str,
    models: impl FnOnce(Proxy) -> Proxy,
) -> HttpServer {
    let key = mcp_middleware::shared_store::StoreKey::from_secret(&[7; 32]).expect("32 bytes");
    let trust = mcp_middleware::shared_store::StoreTrust::new(key);
    let store = SharedStore::redis(&redis.url, namespace, &trust)
        .await
        .expect("redis answers");
    let options = HttpOptions::default()
        .listen("127.0.0.1:0".parse().expect("an address"))
        .shared_store(store);
    models(Proxy::new(support::scripted_upstream()))
        .serve_http(options)
        .await
        .expect("serve_http")
}

async fn replica(redis: &Redis) -> HttpServer {
    replica_of(redis, "replica-sessions", |proxy| {
        proxy.model::<starts::Model>()
    })
    .await
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

/// A replica without the `starts` model (whose start counter the other test reads).
async fn plain_replica(redis: &Redis) -> HttpServer {
    replica_of(redis, "replica-handshakes", |proxy| proxy).await
}

const LEVELS: [&str; 4] = ["debug", "info", "warning", "error"];

/// Sends `requests` in `session` at once, one per connection of `conns`.
async fn burst(
    conns: &mut [Conn],
    session: &str,
    ids: &mut u64,
    requests: Vec<(&str, serde_json::Value)>,
) {
    let calls = conns
        .iter_mut()
        .zip(requests)
        .map(|(conn, (method, params))| {
            *ids += 1;
            call(conn, session, *ids, method, params)
        });
    futures_util::future::join_all(calls).await;
}

/// Round `i`'s `n`-th change of `side`'s URIs (seven each): an unsubscribe every third time.
fn change(side: &str, n: usize, i: usize) -> (&'static str, String) {
    let method = if (n + i) % 3 == 2 {
        "resources/unsubscribe"
    } else {
        "resources/subscribe"
    };
    (method, format!("mem://{side}{}", (n + i) % 7))
}

/// One session, two replicas, many rounds at once on both: each round the client sets the log
/// level and (un)subscribes three URIs of its own through one replica while it (un)subscribes
/// four others through the other, every request of a round in parallel; last, the level and
/// five URIs are changed through both at the same moment. A third replica that restores the
/// session afterwards replays one level and exactly the subscriptions the client holds, and
/// the two racing replicas' upstreams end on the same (each heard the other's changes through
/// the store, and the store ordered the contested ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_handshake_changes_on_two_replicas_all_reach_the_shared_store() {
    const ROUNDS: usize = 15;
    let redis = Redis::start().await;
    let (one, two, three) = (
        plain_replica(&redis).await,
        plain_replica(&redis).await,
        plain_replica(&redis).await,
    );
    let mut first = Vec::new();
    let mut second = Vec::new();
    for _ in 0..6 {
        first.push(Conn::connect(one.local_addr()).await);
        second.push(Conn::connect(two.local_addr()).await);
    }
    let session = start_session(&mut first[0], "replica-sessions").await;
    // The second replica runs the session (and an upstream for it) before the race.
    upstream_state(&mut second[0], &session, 1).await;
    let mut expected = std::collections::BTreeSet::new();
    for i in 0..ROUNDS {
        for (side, count) in [("a", 3), ("b", 4)] {
            for n in 0..count {
                let (method, uri) = change(side, n, i);
                if method == "resources/unsubscribe" {
                    expected.remove(&uri);
                } else {
                    expected.insert(uri);
                }
            }
        }
    }
    let (mut ids_a, mut ids_b) = (100, 100_000);
    let side_a = async {
        for i in 0..ROUNDS {
            let mut requests = vec![(
                "logging/setLevel",
                json!({ "level": LEVELS[i % LEVELS.len()] }),
            )];
            requests.extend((0..3).map(|n| {
                let (method, uri) = change("a", n, i);
                (method, json!({ "uri": uri }))
            }));
            burst(&mut first, &session, &mut ids_a, requests).await;
        }
    };
    let side_b = async {
        for i in 0..ROUNDS {
            let requests = (0..4)
                .map(|n| {
                    let (method, uri) = change("b", n, i);
                    (method, json!({ "uri": uri }))
                })
                .collect();
            burst(&mut second, &session, &mut ids_b, requests).await;
        }
    };
    tokio::join!(side_a, side_b);
    // The same concerns through both at the same moment: the store orders them.
    let contested: Vec<String> = (0..5).map(|n| format!("mem://both{n}")).collect();
    let mut on_a = vec![("logging/setLevel", json!({ "level": "critical" }))];
    let mut on_b = vec![("logging/setLevel", json!({ "level": "alert" }))];
    for uri in &contested {
        on_a.push(("resources/subscribe", json!({ "uri": uri })));
        on_b.push(("resources/unsubscribe", json!({ "uri": uri })));
    }
    tokio::join!(
        burst(&mut first, &session, &mut ids_a, on_a),
        burst(&mut second, &session, &mut ids_b, on_b)
    );
    let mut third = Conn::connect(three.local_addr()).await;
    let restored = upstream_state(&mut third, &session, 1).await;
    let (level, subscribed) = told(&restored);
    assert!(
        matches!(level.as_deref(), Some("critical" | "alert")),
        "{restored}"
    );
    assert_eq!(
        restored["log_levels"].as_array().map(Vec::len),
        Some(1),
        "one level replayed: {restored}"
    );
    let deterministic: std::collections::BTreeSet<String> = subscribed
        .iter()
        .filter(|uri| !contested.contains(uri))
        .cloned()
        .collect();
    assert_eq!(
        deterministic, expected,
        "the restoring replica's upstream was replayed exactly the subscriptions: {restored}"
    );
    // Both racing replicas' upstreams end on what the store holds, through the store's
    // announcements: each upstream answers `state_when` the moment it has been told that.
    let expected_told = json!({"level": level, "subscribed": subscribed});
    // (Bounded below the connection's own wait, so a miss fails here with what it was told.)
    let (first_addr, second_addr) = (one.local_addr(), two.local_addr());
    for (name, conn, addr) in [
        ("first", &mut first[0], first_addr),
        ("second", &mut second[0], second_addr),
    ] {
        let reached = tokio::time::timeout(
            WAIT - std::time::Duration::from_secs(2),
            call(conn, &session, 500_001, "state_when", expected_told.clone()),
        )
        .await;
        if reached.is_err() {
            let mut probe = Conn::connect(addr).await;
            let state = upstream_state(&mut probe, &session, 500_002).await;
            panic!(
                "the {name} replica's upstream never ended on the stored handshake: {:?} vs {:?}",
                told(&state),
                (&level, &subscribed)
            );
        }
    }
    one.shutdown().await;
    two.shutdown().await;
    three.shutdown().await;
}
