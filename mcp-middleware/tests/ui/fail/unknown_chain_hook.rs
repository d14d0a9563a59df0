use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {}

#[proxy_model(extends = [gate], chain = [on_tool_cal, on_tools_list, on_tools_list])]
pub mod focused {}

fn main() {}
