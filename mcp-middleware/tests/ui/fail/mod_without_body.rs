use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused;

fn main() {}
