//! A tutorial: writing a proxy model, composing it, testing it and running it. Every example
//! here is compiled (and, but for those that need a server, run) as a doctest.
//!
//! # 1. Writing a model
//!
//! A model is a module under `#[proxy_model]`. One `use mcp_middleware::prelude::*;` outside it
//! is enough: the attribute brings the prelude inside. Functions named after hooks are onion
//! middleware (they get the request and `next`, and decide what comes back), `#[tool]`
//! functions are synthetic tools, `State` is per session and `Config` is read when the proxy
//! starts.
//!
//! ```rust,standalone_crate
//! use mcp_middleware::prelude::*;
//!
//! /// Caps the number of tool calls per session.
//! #[proxy_model]
//! pub mod budget {
//!     /// How many calls a session may make.
//!     #[derive(Debug, Deserialize, JsonSchema)]
//!     #[serde(default, rename_all = "camelCase")]
//!     pub struct Config {
//!         /// Tool calls allowed per session.
//!         pub max_calls: u32,
//!     }
//!
//!     impl Default for Config {
//!         fn default() -> Self {
//!             Self { max_calls: 20 }
//!         }
//!     }
//!
//!     /// Calls made in this session.
//!     #[derive(Default)]
//!     pub struct State {
//!         /// Calls made so far.
//!         pub used: u32,
//!     }
//!
//!     pub async fn on_tool_call(
//!         ctx: &Context,
//!         params: CallToolRequestParams,
//!         next: Next<'_, hooks::ToolCall>,
//!     ) -> HookResult<CallToolResult> {
//!         let max = ctx.config::<Config>()?.max_calls;
//!         let allowed = ctx.state(|state: &mut State| {
//!             state.used += 1;
//!             state.used <= max
//!         })?;
//!         if !allowed {
//!             return Ok(CallToolResult::error(vec![ContentBlock::text("budget spent")]));
//!         }
//!         next.run(ctx, params).await
//!     }
//!
//!     /// How many tool calls this session has left.
//!     #[tool]
//!     pub async fn budget_left(ctx: &Context) -> HookResult<String> {
//!         let max = ctx.config::<Config>()?.max_calls;
//!         Ok(max.saturating_sub(ctx.state(|state: &mut State| state.used)?).to_string())
//!     }
//! }
//!
//! let model = <budget::Model as ProxyModel>::DESCRIPTOR;
//! assert_eq!(model.name, "budget");
//! assert_eq!(model.tools[0].name, "budget_left");
//! ```
//!
//! A wrong signature is a compile error that says what the hook takes:
//!
//! ```compile_fail
//! use mcp_middleware::prelude::*;
//!
//! #[proxy_model]
//! pub mod wrong {
//!     // error: `on_prompt_get` takes `GetPromptRequestParams` as its second parameter,
//!     // found `CallToolRequestParams`
//!     pub async fn on_prompt_get(
//!         ctx: &Context,
//!         params: CallToolRequestParams,
//!         next: Next<'_, hooks::PromptGet>,
//!     ) -> HookResult<GetPromptResult> {
//!         next.run(ctx, params).await
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! # 2. Composing models
//!
//! `extends = [a, b]` puts the model itself outermost, then `a`, then `b`, then the server. A
//! model whose only job is the composition may be empty:
//!
//! ```rust,standalone_crate
//! use mcp_middleware::prelude::*;
//!
//! /// Counts calls.
//! #[proxy_model]
//! pub mod counter {
//!     #[derive(Default)]
//!     pub struct State {
//!         pub calls: u32,
//!     }
//!
//!     pub async fn on_tool_call(
//!         ctx: &Context,
//!         params: CallToolRequestParams,
//!         next: Next<'_, hooks::ToolCall>,
//!     ) -> HookResult<CallToolResult> {
//!         ctx.state(|state: &mut State| state.calls += 1)?;
//!         next.run(ctx, params).await
//!     }
//! }
//!
//! /// Upper-cases the server's text.
//! #[proxy_model]
//! pub mod shout {
//!     pub async fn transform_content(_ctx: &Context, content: Content) -> HookResult<String> {
//!         Ok(content.text.to_uppercase())
//!     }
//! }
//!
//! /// Both: counted calls, loud answers.
//! #[proxy_model(extends = [counter, shout])]
//! pub mod loud_counter {}
//!
//! let chain = mcp_middleware::chain::layers_of(<loud_counter::Model as ProxyModel>::DESCRIPTOR);
//! let names: Vec<&str> = chain.iter().map(|layer| layer.name).collect();
//! assert_eq!(names, ["loud_counter", "counter", "shout"]);
//! ```
//!
//! Two parents that implement the same hook conflict, and the composition does not compile
//! until the child resolves it: by implementing the hook itself, or with `chain = [on_x]` to run
//! both in `extends` order. The error names the child, the hook, both parents and both fixes.
//!
//! ```compile_fail
//! use mcp_middleware::prelude::*;
//!
//! #[proxy_model]
//! pub mod first {
//!     pub async fn on_tool_call(
//!         ctx: &Context,
//!         params: CallToolRequestParams,
//!         next: Next<'_, hooks::ToolCall>,
//!     ) -> HookResult<CallToolResult> {
//!         next.run(ctx, params).await
//!     }
//! }
//!
//! #[proxy_model]
//! pub mod second {
//!     pub async fn on_tool_call(
//!         ctx: &Context,
//!         params: CallToolRequestParams,
//!         next: Next<'_, hooks::ToolCall>,
//!     ) -> HookResult<CallToolResult> {
//!         next.run(ctx, params).await
//!     }
//! }
//!
//! // error: proxy model `both` extends `first` and `second`, which both implement
//! // `on_tool_call`: implement it in `both` ..., or add `chain = [on_tool_call]` ...
//! #[proxy_model(extends = [first, second])]
//! pub mod both {}
//! # fn main() {}
//! ```
//!
//! # 3. Testing a model
//!
//! That a composition is conflict-free is proved by compiling it. What it does is tested
//! through the real proxy: [`Proxy::serve`](crate::Proxy::serve) serves one client on any pair
//! of streams, so a test can be that client, in front of a real server started as a child
//! process (here the MCP reference server from npm; this crate's own tests use a scripted
//! Python server).
//!
//! ```no_run,standalone_crate
//! use mcp_middleware::prelude::*;
//! use mcp_middleware::serde_json::{Value, json};
//! use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
//!
//! /// Answers `whoami` itself.
//! #[proxy_model]
//! pub mod hello {
//!     /// Says hello.
//!     #[tool]
//!     pub async fn whoami(_ctx: &Context) -> HookResult<String> {
//!         Ok("a proxy".to_owned())
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = StdioServer::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]);
//!     let proxy = Proxy::new(server).model::<hello::Model>();
//!     let (ours, theirs) = tokio::io::duplex(1 << 20);
//!     let (proxy_in, proxy_out) = tokio::io::split(theirs);
//!     let (client_in, mut client_out) = tokio::io::split(ours);
//!     let client = async move {
//!         let mut lines = BufReader::new(client_in).lines();
//!         for message in [
//!             json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
//!                 "protocolVersion": "2025-11-25", "capabilities": {},
//!                 "clientInfo": {"name": "test", "version": "1"}}}),
//!             json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
//!             json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
//!                    "params": {"name": "whoami", "arguments": {}}}),
//!         ] {
//!             client_out.write_all(format!("{message}\n").as_bytes()).await?;
//!         }
//!         let answer = loop {
//!             let line = lines.next_line().await?.ok_or("the proxy closed")?;
//!             let message: Value = mcp_middleware::serde_json::from_str(&line)?;
//!             if message["id"] == 2 {
//!                 break message;
//!             }
//!         };
//!         assert_eq!(answer["result"]["content"][0]["text"], "a proxy");
//!         drop(client_out); // the end of the client's input ends the session
//!         Ok::<_, Box<dyn std::error::Error>>(())
//!     };
//!     let (served, tested) = tokio::join!(proxy.serve(proxy_in, proxy_out), client);
//!     served?;
//!     tested
//! }
//! ```
//!
//! # 4. Running it
//!
//! From your own binary, with the model and its config:
//!
//! ```no_run,standalone_crate
//! use mcp_middleware::prelude::*;
//! # #[proxy_model]
//! # pub mod budget {}
//!
//! fn main() -> Result<(), mcp_middleware::ProxyError> {
//!     Proxy::new(StdioServer::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]))
//!         .model::<budget::Model>()
//!         .run_stdio()
//! }
//! ```
//!
//! Or inside the whole `mcpctl` command line (projects, `proxy`, `serve`, `client`, `describe`),
//! beside the stock models, with the `mcpctl` crate as a dependency and this `main`:
//!
//! ```text
//! fn main() -> std::process::ExitCode {
//!     mcpctl::run()
//! }
//! ```
//!
//! ```text
//! my-mcpctl get proxymodels
//! my-mcpctl proxy --model budget --set budget.maxCalls=5 -- npx -y @modelcontextprotocol/server-everything
//! ```
