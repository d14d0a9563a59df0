use mcp_middleware::prelude::*;

#[proxy_model(chain = [on_tool_call])]
pub mod focused {}

fn main() {}
