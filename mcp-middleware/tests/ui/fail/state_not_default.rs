use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    pub struct State {
        pub level: u8,
    }
}

fn main() {}
