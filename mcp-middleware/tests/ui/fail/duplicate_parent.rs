use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {}

#[proxy_model(extends = [gate, self::gate])]
pub mod focused {}

#[proxy_model(extends = [gate, gate])]
pub mod again {}

fn main() {}
