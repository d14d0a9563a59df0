//! One `use mcp_middleware::prelude::*;` outside the module is enough: the macro brings the
//! prelude inside. Derives are recognised by their path (`serde::Deserialize`,
//! `mcp_middleware::prelude::JsonSchema`), and `Proxy` and `StdioServer` come with the prelude.
use mcp_middleware::prelude::*;

#[proxy_model]
pub mod counted {
    /// How loud.
    #[derive(Debug, Default, serde::Deserialize, mcp_middleware::prelude::JsonSchema)]
    #[serde(default)]
    pub struct Config {
        /// The level.
        pub level: u8,
    }

    /// Calls so far.
    #[derive(Default)]
    pub struct State {
        pub calls: u32,
    }

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        ctx.state(|state: &mut State| state.calls += 1)?;
        next.run(ctx, params).await
    }

    /// Says how many calls there were.
    #[tool]
    pub async fn calls(ctx: &Context) -> HookResult<String> {
        Ok(ctx.state(|state: &mut State| state.calls)?.to_string())
    }
}

fn main() {
    let model = <counted::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.name, "counted");
    assert!(model.config.is_some());
    assert_eq!(model.tools[0].name, "calls");
    let _proxy: Proxy = Proxy::new(StdioServer::new("true")).model::<counted::Model>();
}
