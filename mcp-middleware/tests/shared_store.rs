//! Model states and the shared store: `#[proxy_model]` finds out by itself
//! whether a model's `State` is serde, a storable state round-trips through its descriptor, and
//! serving with a shared store refuses at start a chain whose state cannot travel, naming the
//! model.

#![allow(missing_docs, unreachable_pub)]

use mcp_middleware::prelude::*;

#[cfg(feature = "redis")]
#[path = "support/redis_server.rs"]
mod redis_server;

/// A model whose state derives serde: storable.
#[proxy_model]
pub mod counted {
    /// Calls seen.
    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    pub struct State {
        pub calls: u64,
        pub names: Vec<String>,
    }
}

/// A model whose state is not serde: works in-process, refused by a shared store.
#[proxy_model]
pub mod unstorable {
    /// Holds something serde cannot write.
    #[derive(Debug, Default)]
    pub struct State {
        pub started: Option<std::time::Instant>,
    }
}

/// Composes both: the chain has one storable and one unstorable state.
#[proxy_model(extends = [counted, unstorable])]
pub mod both {}

#[test]
fn the_macro_knows_which_states_are_storable() {
    let counted = counted::__PROXY_MODEL_STATE.expect("counted has a State");
    let unstorable = unstorable::__PROXY_MODEL_STATE.expect("unstorable has a State");
    assert!(counted.is_storable());
    assert!(!unstorable.is_storable());
    assert!(unstorable.save(&unstorable::State::default()).is_none());
}

#[test]
fn a_storable_state_round_trips_as_json() {
    let descriptor = counted::__PROXY_MODEL_STATE.expect("counted has a State");
    let state = counted::State {
        calls: 3,
        names: vec!["echo".to_owned()],
    };
    let saved = descriptor.save(&state).expect("storable").expect("saved");
    assert_eq!(saved, serde_json::json!({ "calls": 3, "names": ["echo"] }));
    let loaded = descriptor.load(saved).expect("storable").expect("loaded");
    let loaded = loaded
        .downcast_ref::<counted::State>()
        .expect("the state type");
    assert_eq!(
        (loaded.calls, loaded.names.clone()),
        (3, vec!["echo".to_owned()])
    );
    let wrong = descriptor.load(serde_json::json!({ "calls": "three" }));
    assert!(
        wrong.is_some_and(|r| r.is_err()),
        "a bad record is an error, not a panic"
    );
}

/// With a real `redis-server` on a free loopback port (scripts/setup-interop installs it).
#[cfg(feature = "redis")]
#[tokio::test]
async fn serving_with_a_shared_store_refuses_a_model_whose_state_cannot_travel() {
    use mcp_middleware::http::HttpOptions;
    use mcp_middleware::shared_store::SharedStore;
    use mcp_middleware::upstream::StdioServer;
    use mcp_middleware::{Proxy, ProxyError};

    let redis = redis_server::Redis::start().await;
    let url = redis.url.clone();
    let key = mcp_middleware::shared_store::StoreKey::from_secret(&[7; 32]).expect("32 bytes");
    let trust = mcp_middleware::shared_store::StoreTrust::new(key);
    let store = SharedStore::redis(&url, "tests", &trust)
        .await
        .expect("redis-server answers once ready");
    let options = HttpOptions::default()
        .listen("127.0.0.1:0".parse().expect("an address"))
        .shared_store(store);
    let refused = Proxy::new(StdioServer::new("true"))
        .model::<both::Model>()
        .serve_http(options.clone())
        .await;
    match refused {
        Err(err @ ProxyError::StateNotStorable { .. }) => {
            assert!(err.to_string().contains("`unstorable`"), "{err}")
        }
        other => panic!("expected StateNotStorable, got {:?}", other.map(|_| ())),
    }
    let served = Proxy::new(StdioServer::new("true"))
        .model::<counted::Model>()
        .serve_http(options)
        .await;
    assert!(served.is_ok(), "a storable chain serves");
}
