use mcp_middleware::prelude::*;

#[proxy_model(name = focused)]
pub mod focused {}

fn main() {}
