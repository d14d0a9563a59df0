use mcp_middleware::prelude::*;

// `left` inherits `on_tool_call` from `base`; `alpha` implements its own: the message says where
// each implementation comes from.
#[proxy_model(extends = [mcp_middleware_ui_parents::left, mcp_middleware_ui_parents::alpha])]
pub mod focused {}

fn main() {}
