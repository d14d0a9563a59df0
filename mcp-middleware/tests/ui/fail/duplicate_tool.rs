use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[tool]
    pub async fn status(_ctx: &Context) -> HookResult<String> {
        Ok(String::new())
    }

    #[tool(name = "status")]
    pub async fn other_status(_ctx: &Context) -> HookResult<String> {
        Ok(String::new())
    }
}

fn main() {}
