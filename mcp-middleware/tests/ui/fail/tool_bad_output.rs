use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[tool]
    pub async fn count(_ctx: &Context) -> HookResult<u32> {
        Ok(3)
    }
}

fn main() {}
