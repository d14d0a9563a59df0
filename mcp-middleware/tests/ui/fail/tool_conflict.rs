use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {
    use mcp_middleware::prelude::*;

    #[tool]
    pub async fn status(_ctx: &Context) -> HookResult<&'static str> {
        Ok("gate")
    }
}

#[proxy_model]
pub mod paginate {
    use mcp_middleware::prelude::*;

    #[tool(name = "status")]
    pub async fn paginate_status(_ctx: &Context) -> HookResult<&'static str> {
        Ok("paginate")
    }
}

#[proxy_model(extends = [gate, paginate])]
pub mod focused {}

fn main() {}
