use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
    ) -> HookResult<CallToolResult> {
        let _ = (ctx, params);
        Ok(CallToolResult::success(vec![]))
    }
}

fn main() {}
