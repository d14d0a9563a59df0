use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {}

#[proxy_model(extends = gate)]
pub mod focused {}

fn main() {}
