// A parameter of another hook's type: the error says what the hook takes, then what it found.
use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    pub async fn on_prompt_get(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::PromptGet>,
    ) -> HookResult<GetPromptResult> {
        let _ = (ctx, params, next);
        Err(ErrorData::internal_error("unreachable", None))
    }
}

fn main() {}
