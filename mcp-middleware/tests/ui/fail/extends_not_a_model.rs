use mcp_middleware::prelude::*;

pub mod helpers {}

#[proxy_model(extends = [helpers])]
pub mod focused {}

fn main() {}
