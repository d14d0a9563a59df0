//! Proxy models defined outside `mcp-middleware`, used by its trybuild cases (`tests/ui`) to
//! check composition across crates:
//!
//! - [`alpha`] and [`beta`] both implement `on_tool_call` and both define the tool `shared`: a
//!   model extending both does not compile unless it resolves the two conflicts.
//! - [`base`] is a shared ancestor: two models extending it, extended together, form a diamond,
//!   which is not a conflict.
//! - [`left`] and [`right`] extend [`base`] (a diamond within this crate).
#![forbid(unsafe_code)]

use mcp_middleware::proxy_model;

/// Marks tool results with `alpha`.
///
/// Defines the tool `shared`, as [`beta`] does.
#[proxy_model]
pub mod alpha {
    use mcp_middleware::prelude::*;

    /// Adds a line to every tool result.
    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        let mut result = next.run(ctx, params).await?;
        result.content.push(ContentBlock::text("alpha"));
        Ok(result)
    }

    /// A tool `beta` defines too.
    #[tool]
    pub async fn shared(_ctx: &Context) -> HookResult<&'static str> {
        Ok("alpha")
    }
}

/// Marks tool results with `beta`.
#[proxy_model]
pub mod beta {
    use mcp_middleware::prelude::*;

    /// Adds a line to every tool result.
    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        let mut result = next.run(ctx, params).await?;
        result.content.push(ContentBlock::text("beta"));
        Ok(result)
    }

    /// A tool `alpha` defines too.
    #[tool(name = "shared")]
    pub async fn also_shared(_ctx: &Context) -> HookResult<String> {
        Ok("beta".to_owned())
    }
}

/// Counts tool calls: the shared ancestor of diamonds.
#[proxy_model(name = "ui-base")]
pub mod base {
    use mcp_middleware::prelude::*;

    /// Tool calls seen in this session.
    #[derive(Default)]
    pub struct State {
        /// How many.
        pub calls: u64,
    }

    /// Counts the call, then passes it on.
    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        ctx.state(|state: &mut State| state.calls += 1)?;
        next.run(ctx, params).await
    }

    /// How many tool calls this session made.
    #[tool]
    pub async fn calls(ctx: &Context) -> HookResult<String> {
        let calls = ctx.state(|state: &mut State| state.calls)?;
        Ok(calls.to_string())
    }
}

/// One side of a diamond over [`base`].
#[proxy_model(extends = [crate::base])]
pub mod left {
    use mcp_middleware::prelude::*;

    /// Passes the listing on.
    pub async fn on_tools_list(
        ctx: &Context,
        params: Option<PaginatedRequestParams>,
        next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        next.run(ctx, params).await
    }
}

/// The other side of a diamond over [`base`].
#[proxy_model(extends = [self::base])]
pub mod right {}
