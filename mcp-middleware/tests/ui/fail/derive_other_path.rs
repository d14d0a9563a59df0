// A derive named like serde's but on another path is not serde's: the model adds no
// `#[serde(crate = ..)]` for it (which would be a second error, an unknown `serde` attribute),
// so the only error is the unresolved path itself.
use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    #[derive(Debug, not_serde::Serialize)]
    pub struct Note {
        pub text: String,
    }
}

fn main() {}
