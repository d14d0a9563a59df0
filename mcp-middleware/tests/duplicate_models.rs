//! Two models with one name in one binary: the proxy refuses to start, naming both.
//! (A test binary of its own: every other proxy in it would refuse to start too.)

#![allow(missing_docs, unreachable_pub)]

mod support;

use mcp_middleware::prelude::*;
use mcp_middleware::{Proxy, ProxyError, registry};
use support::{Client, scripted_upstream};

/// The first twin.
#[proxy_model(name = "twin")]
pub mod first {}

/// The second twin.
#[proxy_model(name = "twin")]
pub mod second {}

#[tokio::test]
async fn duplicate_model_names_are_refused_at_start_naming_both() {
    let refused = Client::connect(Proxy::new(scripted_upstream()).model::<first::Model>())
        .close()
        .await;
    match refused {
        Err(ProxyError::DuplicateModel {
            name,
            first,
            second,
        }) => {
            assert_eq!(name, "twin");
            let both = [first, second];
            assert!(both.iter().any(|m| m.ends_with("::first")), "{both:?}");
            assert!(both.iter().any(|m| m.ends_with("::second")), "{both:?}");
        }
        other => panic!("expected a duplicate-name error, got {other:?}"),
    }
    let err = registry::models().unwrap_err();
    assert!(err.to_string().contains("`twin`"), "{err}");
}
