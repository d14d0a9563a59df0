use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {}

#[proxy_model(extends = [gate], chain = on_tool_call)]
pub mod focused {}

fn main() {}
