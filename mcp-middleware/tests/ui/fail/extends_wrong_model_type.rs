use mcp_middleware::prelude::*;

pub mod lookalike {
    pub struct Model;
}

#[proxy_model(extends = [lookalike])]
pub mod focused {}

fn main() {}
