use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {}

#[proxy_model(extends = [gate], chain = [on_tool_call])]
pub mod focused {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        next.run(ctx, params).await
    }
}

fn main() {}
