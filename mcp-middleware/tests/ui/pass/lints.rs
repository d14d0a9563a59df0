//! Generated code is clean under strict lints, for public and private model modules.
#![deny(
    warnings,
    unreachable_pub,
    missing_docs,
    missing_debug_implementations,
    unused
)]

use mcp_middleware::prelude::*;

/// A public model.
#[proxy_model]
pub mod public {
    use mcp_middleware::prelude::*;

    /// Its state.
    #[derive(Debug, Default)]
    pub struct State;

    /// A tool.
    #[tool]
    pub async fn ping(_ctx: &Context) -> HookResult<&'static str> {
        Ok("pong")
    }
}

/// A private model.
#[proxy_model(extends = [public])]
mod private {
    use mcp_middleware::prelude::*;

    #[derive(Deserialize, JsonSchema)]
    struct Args {
        text: String,
    }

    #[tool]
    async fn echo(_ctx: &Context, args: Args) -> HookResult<String> {
        Ok(args.text)
    }

    async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        next.run(ctx, params).await
    }

    #[observer]
    fn record(_ctx: &Context, _observation: &Observation) {}
}

pub(crate) mod nested {
    //! A model in a `pub(crate)` module.

    /// Restricted.
    #[mcp_middleware::proxy_model]
    pub(crate) mod restricted {}
}

fn main() {
    assert_eq!(
        <private::Model as ProxyModel>::DESCRIPTOR.tools[0].name,
        "echo"
    );
    assert_eq!(
        <nested::restricted::Model as ProxyModel>::DESCRIPTOR.name,
        "restricted"
    );
}
