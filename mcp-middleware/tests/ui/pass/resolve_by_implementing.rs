//! Two parents implement `on_tool_call` and define the tool `status`; the child resolves both by
//! implementing the hook (calling a parent's function explicitly) and defining the tool.

use mcp_middleware::__private::HookId;
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

    #[tool]
    pub async fn status(_ctx: &Context) -> HookResult<&'static str> {
        Ok("gate")
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

    #[tool]
    pub async fn status(_ctx: &Context) -> HookResult<&'static str> {
        Ok("paginate")
    }
}

/// Both, with the conflicts resolved here.
#[proxy_model(extends = [gate, paginate])]
pub mod focused {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        super::gate::on_tool_call(ctx, params, next).await
    }

    #[tool]
    pub async fn status(_ctx: &Context) -> HookResult<&'static str> {
        Ok("focused")
    }
}

fn main() {
    let model = <focused::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.parent_names(), ["gate", "paginate"]);
    assert!(model.hooks.contains(HookId::ToolCall));
    assert_eq!(
        model.owners[HookId::ToolCall as usize],
        Some(model.defined_at)
    );
    assert_eq!(model.tools[0].name, "status");
}
