use mcp_middleware::prelude::*;

#[proxy_model]
pub mod gate {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        next.run(ctx, params).await
    }
}

#[proxy_model]
pub mod paginate {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        next.run(ctx, params).await
    }

    pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
        Ok(content.text)
    }
}

#[proxy_model]
pub mod shout {
    use mcp_middleware::prelude::*;

    pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
        Ok(content.text.to_uppercase())
    }
}

#[proxy_model(extends = [gate, paginate])]
pub mod focused {}

// Each conflicting pair of parents is reported under its own `extends` entry.
#[proxy_model(extends = [gate, shout, paginate])]
pub mod loud {}

fn main() {}
