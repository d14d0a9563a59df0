use mcp_middleware::prelude::*;

// `alpha` and `beta` both implement `on_tool_call`; the tool `shared` is resolved here.
#[proxy_model(extends = [mcp_middleware_ui_parents::alpha, mcp_middleware_ui_parents::beta])]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[tool]
    pub async fn shared(_ctx: &Context) -> HookResult<&'static str> {
        Ok("mine")
    }
}

fn main() {}
