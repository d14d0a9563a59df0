use mcp_middleware::prelude::*;

#[proxy_model]
pub fn focused() {}

fn main() {}
