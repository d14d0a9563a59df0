//! Two small models and their composition.

use mcp_middleware::prelude::*;

/// Caps the number of tool calls per session.
///
/// Once the budget is spent, calls to upstream tools get a tool error instead of reaching the
/// server. The synthetic tool `budget_left` tells the model how many calls remain.
#[proxy_model]
pub mod budget {
    use mcp_middleware::prelude::*;

    /// How many calls a session may make.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    pub struct Config {
        /// Tool calls allowed per session.
        pub max_calls: u32,
    }

    impl Default for Config {
        fn default() -> Self {
            Self { max_calls: 20 }
        }
    }

    /// Calls made in this session.
    #[derive(Default)]
    pub struct State {
        /// Calls made so far.
        pub used: u32,
    }

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        // The model's own tool is free: the hook sees calls to it too.
        if params.name == "budget_left" {
            return next.run(ctx, params).await;
        }
        let max = ctx.config::<Config>()?.max_calls;
        let allowed = ctx.state(|state: &mut State| {
            let allowed = state.used < max;
            if allowed {
                state.used += 1;
            }
            allowed
        })?;
        if !allowed {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "the tool-call budget of this session ({max} calls) is spent"
            ))]));
        }
        next.run(ctx, params).await
    }

    /// How many tool calls this session has left.
    #[tool]
    pub async fn budget_left(ctx: &Context) -> HookResult<String> {
        let max = ctx.config::<Config>()?.max_calls;
        let used = ctx.state(|state: &mut State| state.used)?;
        Ok(max.saturating_sub(used).to_string())
    }
}

/// Redacts secrets from what the server sends back.
///
/// Every word of text content that starts with one of the configured prefixes becomes
/// `[redacted]`, in tool results, resource reads and prompt messages alike.
#[proxy_model]
pub mod redact {
    use mcp_middleware::prelude::*;

    /// What counts as a secret.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(default, deny_unknown_fields)]
    pub struct Config {
        /// Word prefixes that mark a secret.
        pub prefixes: Vec<String>,
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                prefixes: vec!["sk-".to_owned(), "ghp_".to_owned()],
            }
        }
    }

    pub async fn transform_content(ctx: &Context, content: Content) -> HookResult<String> {
        let prefixes = &ctx.config::<Config>()?.prefixes;
        let redacted: Vec<&str> = content
            .text
            .split(' ')
            .map(|word| {
                if prefixes.iter().any(|p| word.starts_with(p.as_str())) {
                    "[redacted]"
                } else {
                    word
                }
            })
            .collect();
        Ok(redacted.join(" "))
    }
}

/// A budgeted session whose results are redacted: `budget` and `redact` composed.
#[proxy_model(extends = [budget, redact])]
pub mod guarded {}
