// `next` of another hook: one error, saying which `Next` the hook takes.
use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::PromptGet>,
    ) -> HookResult<CallToolResult> {
        let _ = (ctx, params, next);
        Ok(CallToolResult::success(vec![]))
    }
}

fn main() {}
