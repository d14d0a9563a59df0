// Every mistake in the attribute is reported, each at its own tokens.
use mcp_middleware::prelude::*;

#[proxy_model(extend = [a], name = 3, chain = [on_tool_cal], crate = "")]
pub mod focused {}

fn main() {}
