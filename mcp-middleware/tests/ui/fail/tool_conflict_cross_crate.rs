use mcp_middleware::prelude::*;
use mcp_middleware_ui_parents::{alpha, beta};

// `alpha` and `beta` both define the tool `shared`; `on_tool_call` is resolved by `chain`.
#[proxy_model(extends = [alpha, beta], chain = [on_tool_call])]
pub mod focused {}

fn main() {}
