// A derive named like schemars' but on another path is not schemars': the model gets no
// `#[schemars(crate = ..)]` for it, so the only error is the unresolved path itself.
use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    #[derive(Debug, Default, Deserialize, not_schemars::JsonSchema)]
    pub struct Config {
        pub level: u8,
    }
}

fn main() {}
