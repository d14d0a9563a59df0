use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    pub fn on_everything() {}
}

fn main() {}
