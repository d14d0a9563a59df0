//! A model with every kind of part: docs, `State`, `Config`, tools (with and without arguments,
//! renamed), an observer, `transform_content`, session hooks and helpers left alone.

use mcp_middleware::__private::HookId;
use mcp_middleware::prelude::*;

/// Keeps a session focused.
///
/// Longer description: tools to begin and end a session,
/// and a transform.
#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    /// Calls seen.
    #[derive(Default)]
    pub struct State {
        pub calls: u64,
    }

    /// How focused to be.
    #[derive(Deserialize, JsonSchema)]
    #[serde(default, deny_unknown_fields)]
    pub struct Config {
        /// The budget.
        pub budget: u32,
    }

    impl Default for Config {
        fn default() -> Self {
            Self { budget: 7 }
        }
    }

    /// What `begin_session` takes.
    #[derive(Deserialize, JsonSchema)]
    pub struct BeginArgs {
        /// The topic.
        pub topic: String,
    }

    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        ctx.state(|state: &mut State| state.calls += 1)?;
        next.run(ctx, params).await
    }

    /// Begins a focused session.
    ///
    /// Give it a topic.
    #[tool]
    pub async fn begin_session(_ctx: &Context, args: BeginArgs) -> HookResult<String> {
        Ok(format!("focused on {}", helper(&args.topic)))
    }

    /// Ends it.
    #[tool(name = "end-session")]
    async fn end_session(_ctx: &Context) -> HookResult<CallToolResult> {
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }

    #[tool]
    async fn static_text(_ctx: &Context) -> HookResult<&'static str> {
        Ok("static")
    }

    #[observer]
    pub fn record(_ctx: &Context, observation: &Observation) {
        let _ = observation.method.len();
    }

    pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
        Ok(content.text.to_uppercase())
    }

    pub async fn on_session_start(_ctx: &Context) -> HookResult<()> {
        Ok(())
    }

    pub async fn on_session_end(_ctx: &Context) -> HookResult<()> {
        Ok(())
    }

    fn helper(topic: &str) -> String {
        topic.trim().to_owned()
    }
}

fn main() {
    let model = <focused::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.name, "focused");
    assert_eq!(model.summary, "Keeps a session focused.");
    assert_eq!(
        model.docs,
        "Keeps a session focused.\n\nLonger description: tools to begin and end a session,\nand a transform."
    );
    assert!(
        model.defined_at.ends_with("::focused"),
        "{}",
        model.defined_at
    );
    assert!(model.parents.is_empty());
    assert_eq!(
        model.hooks.iter().collect::<Vec<_>>(),
        [
            HookId::ToolCall,
            HookId::TransformContent,
            HookId::SessionStart,
            HookId::SessionEnd
        ]
    );
    assert!(model.chained.is_empty());
    assert_eq!(
        model.owners[HookId::ToolCall as usize],
        Some(model.defined_at)
    );
    assert_eq!(model.owners[HookId::ToolsList as usize], None);

    let tools: Vec<_> = model.tools.iter().map(|tool| tool.name).collect();
    assert_eq!(tools, ["begin_session", "end-session", "static_text"]);
    assert_eq!(
        model.tools[0].description,
        "Begins a focused session.\n\nGive it a topic."
    );
    let schema = (model.tools[0].input_schema)();
    assert_eq!(schema["type"], "object");
    assert!(schema["properties"]["topic"].is_object(), "{schema:?}");
    assert_eq!((model.tools[1].input_schema)()["type"], "object");
    assert_eq!(model.tools[2].description, "");

    assert_eq!(model.observers, ["record"]);
    let config = model.config.expect("Config");
    assert!((config.type_name)().ends_with("focused::Config"));
    assert!((config.schema)()["properties"]["budget"].is_object());
    assert!((config.load)(None).is_ok());
    let refused = (config.load)(Some(&serde_json::json!({ "budget": "x" })))
        .err()
        .expect("a bad budget is refused");
    assert_eq!(refused.field.as_deref(), Some("budget"));
    let state = model.state.expect("State");
    assert!((state.new)().downcast::<focused::State>().is_ok());

    let found = mcp_middleware::registry::find("focused").expect("registered");
    assert!(found.same(model));
}
