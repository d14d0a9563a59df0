use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[tool(title = "Status")]
    pub async fn status(_ctx: &Context) -> HookResult<String> {
        Ok(String::new())
    }

    #[tool(name = "has space")]
    pub async fn spaced(_ctx: &Context) -> HookResult<String> {
        Ok(String::new())
    }

    #[tool]
    pub struct NotAFunction;
}

fn main() {}
