//! Composition across crates: `alpha` and `beta` (in `mcp_middleware_ui_parents`) conflict on
//! `on_tool_call` and the tool `shared`, resolved here; and a diamond over the other crate's
//! `base`, through its `left` and a local model.

use mcp_middleware::__private::HookId;
use mcp_middleware::prelude::*;
use mcp_middleware_ui_parents as parents;

#[proxy_model(extends = [mcp_middleware_ui_parents::alpha, parents::beta])]
pub mod resolved {
    use mcp_middleware::prelude::*;

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        mcp_middleware_ui_parents::beta::on_tool_call(ctx, params, next).await
    }

    #[tool]
    pub async fn shared(_ctx: &Context) -> HookResult<&'static str> {
        Ok("resolved")
    }
}

#[proxy_model(extends = [parents::alpha, parents::beta], chain = [on_tool_call])]
pub mod chained {
    use mcp_middleware::prelude::*;

    #[tool(name = "shared")]
    pub async fn mine(_ctx: &Context) -> HookResult<&'static str> {
        Ok("chained")
    }
}

#[proxy_model(extends = [parents::base])]
pub mod local_side {}

#[proxy_model(extends = [parents::left, local_side, parents::right])]
pub mod diamond {}

fn main() {
    let model = <resolved::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.parent_names(), ["alpha", "beta"]);
    let diamond = <diamond::Model as ProxyModel>::DESCRIPTOR;
    let base = <parents::base::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(base.name, "ui-base");
    assert_eq!(
        diamond.owners[HookId::ToolCall as usize],
        Some(base.defined_at)
    );
    assert!(mcp_middleware::registry::find("ui-base").is_ok());
    assert!(mcp_middleware::registry::find("diamond").is_ok());
}
