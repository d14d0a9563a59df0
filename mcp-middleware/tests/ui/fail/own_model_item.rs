use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    pub struct Model;
}

fn main() {}
