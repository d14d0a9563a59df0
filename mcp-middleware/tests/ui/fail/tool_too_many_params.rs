use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[tool]
    pub async fn add(_ctx: &Context, a: u32, b: u32) -> HookResult<String> {
        Ok((a + b).to_string())
    }
}

fn main() {}
