use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[observer]
    pub async fn record(_ctx: &Context, _observation: &Observation) {}
}

fn main() {}
