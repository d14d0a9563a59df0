use mcp_middleware::prelude::*;

// A local model against one from another crate, through a diamond that is fine (`base` twice)
// and a real conflict (`loud` and `alpha` both implement `on_tool_call`).
#[proxy_model]
pub mod loud {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        next.run(ctx, params).await
    }
}

#[proxy_model(extends = [mcp_middleware_ui_parents::left, mcp_middleware_ui_parents::right])]
pub mod diamond {}

#[proxy_model(extends = [loud, mcp_middleware_ui_parents::alpha])]
pub mod focused {}

fn main() {}
