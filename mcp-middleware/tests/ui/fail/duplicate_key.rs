use mcp_middleware::prelude::*;

#[proxy_model(name = "a", name = "b")]
pub mod focused {}

fn main() {}
