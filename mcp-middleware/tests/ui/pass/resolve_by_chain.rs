//! Two parents implement `on_tool_call`; `chain = [on_tool_call]` runs both in `extends` order.
//! Parents are named by `crate::` and `self::` paths.

use mcp_middleware::__private::HookId;
use mcp_middleware::prelude::*;

pub mod models {
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

        pub async fn on_tools_list(
            ctx: &Context,
            params: Option<PaginatedRequestParams>,
            next: Next<'_, hooks::ToolsList>,
        ) -> HookResult<ListToolsResult> {
            next.run(ctx, params).await
        }
    }
}

#[proxy_model(extends = [crate::models::gate, self::models::paginate], chain = [on_tool_call])]
pub mod focused {}

fn main() {
    let model = <focused::Model as ProxyModel>::DESCRIPTOR;
    assert!(model.hooks.is_empty());
    assert_eq!(model.chained.iter().collect::<Vec<_>>(), [HookId::ToolCall]);
    assert_eq!(
        model.owners[HookId::ToolCall as usize],
        Some(model.defined_at)
    );
    assert_eq!(
        model.owners[HookId::ToolsList as usize],
        Some(model.parents[1].defined_at)
    );
    assert_eq!(model.parents[0].name, "gate");
}
