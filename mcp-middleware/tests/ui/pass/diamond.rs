//! A diamond: `left` and `right` both extend `base`, which implements `on_tool_call` and defines a
//! tool; extending both is not a conflict, since both bring the same model's hook and tool.

use mcp_middleware::__private::HookId;
use mcp_middleware::prelude::*;

#[proxy_model]
pub mod base {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        next.run(ctx, params).await
    }

    #[tool]
    pub async fn info(_ctx: &Context) -> HookResult<&'static str> {
        Ok("base")
    }
}

#[proxy_model(extends = [base])]
pub mod left {}

#[proxy_model(extends = [base])]
pub mod right {
    use mcp_middleware::prelude::*;

    pub async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        next.run(ctx, params).await
    }
}

#[proxy_model(extends = [left, right])]
pub mod top {}

fn main() {
    let model = <top::Model as ProxyModel>::DESCRIPTOR;
    let base = <base::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(
        model.owners[HookId::ToolCall as usize],
        Some(base.defined_at)
    );
    assert!(
        model.owners[HookId::ToolsList as usize]
            .unwrap()
            .ends_with("::right")
    );
    assert!(model.parents[0].parents[0].same(base));
}
