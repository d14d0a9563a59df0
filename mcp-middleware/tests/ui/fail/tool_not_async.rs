use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[tool]
    pub fn status(_ctx: &Context) -> HookResult<String> {
        Ok(String::new())
    }
}

fn main() {}
