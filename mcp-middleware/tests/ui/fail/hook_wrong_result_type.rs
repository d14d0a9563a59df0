use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    pub async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<CallToolResult> {
        let _ = (ctx, params, next);
        Ok(CallToolResult::success(vec![]))
    }
}

fn main() {}
