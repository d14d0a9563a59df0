use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {}

#[proxy_model(extends = [gate, "paginate"], chain = [on_tool_call, 3])]
pub mod focused {}

fn main() {}
