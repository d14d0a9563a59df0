//! Procedural macros of mcp-middleware: `#[proxy_model]`. Use it through `mcp-middleware`, which
//! re-exports it (`mcp_middleware::proxy_model`, also in its prelude).
//!
//! How the macro is built (in the manner of serde_derive and thiserror-impl):
//!
//! - `attr`: the attribute's arguments (`extends`, `chain`, `name`, `crate`), spans kept.
//! - `ast`: the module: doc comment, hooks, `#[tool]`s, `#[observer]`s, `State`, `Config`.
//! - `catalogue`: the hook names, their ids and signatures, and "did you mean".
//! - `check`: duplicates, signatures, `chain` and `extends`; every error collected (`ctxt`).
//! - `expand`: the generated code (its module docs show the shape).
//! - `fallback`: after an error, a stand-in model so the error is not followed by a cascade.
//!
//! What it accepts and the diagnostics it gives are pinned by `mcp-middleware/tests/ui`.
#![forbid(unsafe_code)]

mod ast;
mod attr;
mod catalogue;
mod check;
mod ctxt;
mod expand;
mod fallback;

use proc_macro::TokenStream;

/// Turns a module into a proxy model (SPEC F1).
///
/// ```
/// use mcp_middleware::prelude::*;
///
/// /// Counts tool calls. (The first paragraph is the model's summary.)
/// #[proxy_model]
/// pub mod counting {
///     use mcp_middleware::prelude::*;
///
///     /// Per-session state: any item named `State`, `Default + Send + 'static`.
///     #[derive(Default)]
///     pub struct State {
///         pub calls: u64,
///     }
///
///     /// Configuration: any item named `Config`, `Deserialize + JsonSchema`.
///     #[derive(Deserialize, JsonSchema, Default)]
///     #[serde(default)]
///     pub struct Config {
///         pub limit: Option<u64>,
///     }
///
///     /// A hook: its name says which (`on_tool_call`, `on_tools_list`, ..., see `hooks`).
///     pub async fn on_tool_call(
///         ctx: &Context,
///         params: CallToolRequestParams,
///         next: Next<'_, hooks::ToolCall>,
///     ) -> HookResult<CallToolResult> {
///         ctx.state(|state: &mut State| state.calls += 1)?;
///         next.run(ctx, params).await
///     }
///
///     /// A synthetic tool; its doc comment is its description.
///     #[tool]
///     pub async fn calls(ctx: &Context) -> HookResult<String> {
///         Ok(ctx.state(|state: &mut State| state.calls)?.to_string())
///     }
///
///     /// What `add` takes (its JSON schema is the tool's input schema).
///     #[derive(Deserialize, JsonSchema)]
///     pub struct AddArgs {
///         pub by: u64,
///     }
///
///     /// Another tool, with arguments and its own name.
///     #[tool(name = "add-calls")]
///     pub async fn add(ctx: &Context, args: AddArgs) -> HookResult<String> {
///         ctx.state(|state: &mut State| state.calls += args.by)?;
///         Ok("added".to_owned())
///     }
///
///     /// An observer: sees every finished request, cannot change it.
///     #[observer]
///     pub fn record(_ctx: &Context, observation: &Observation) {
///         let _ = observation.outcome;
///     }
/// }
///
/// /// Composes `counting` with a model of its own.
/// #[proxy_model(extends = [counting], name = "counting-plus")]
/// pub mod counting_plus {}
///
/// let model = <counting_plus::Model as ProxyModel>::DESCRIPTOR;
/// assert_eq!(model.name, "counting-plus");
/// assert_eq!(model.parents[0].tools[1].name, "add-calls");
/// ```
///
/// # What the module may contain
///
/// - Hook functions, named after their hook (`on_initialize`, `on_discover`, `on_tools_list`,
///   `on_tool_call`, `on_resources_list`, `on_resource_templates_list`, `on_resource_read`,
///   `on_resource_subscribe`, `on_resource_unsubscribe`, `on_prompts_list`, `on_prompt_get`,
///   `on_completion`, `on_set_level`, `on_request`, `on_client_notification`,
///   `on_server_notification`, `on_server_request`, `transform_content`, `on_session_start`,
///   `on_session_end`), with the signatures `mcp_middleware::hooks` gives. Any other function
///   named `on_*` is an error ("did you mean ..."), and so is a hook defined twice.
/// - `#[tool]` / `#[tool(name = "..")]` async functions taking `ctx: &Context` and optionally one
///   arguments value (`Deserialize + JsonSchema`), returning `HookResult` of `CallToolResult`,
///   `String` or `&str`.
/// - `#[observer]` functions `fn(ctx: &Context, observation: &Observation)`, as many as wanted.
/// - `State` and `Config` (a struct, enum, type alias or `use`), and anything else, left alone.
///   Types of the module that derive serde's or schemars' traits get `#[serde(crate = ..)]` /
///   `#[schemars(crate = ..)]` pointing into `mcp_middleware`, so a crate depending on
///   `mcp-middleware` alone compiles.
///
/// The macro adds `pub struct Model`, which implements `ProxyModel` and `Layer` and is registered
/// with `inventory`; an item of the module's own named `Model` is an error.
///
/// # Arguments
///
/// - `extends = [a, path::to::b]`: parent models, resolved where the attribute is written. Two
///   parents whose compositions implement the same hook (through different models), or define a
///   tool of the same name, do not compile unless this model implements that hook (or defines that
///   tool) itself, or lists the hook in `chain`. The error points at the `extends` entry. A diamond
///   (a shared ancestor) is not a conflict; observers never conflict.
/// - `chain = [on_x, ..]`: run the parents' implementations of these hooks in `extends` order.
/// - `name = "my-model"`: the registered name (default: the module's name).
/// - `crate = ::path::to::mcp_middleware`: where `mcp_middleware` is, for crates that re-export
///   it. The path is used inside the module and around it, so make it absolute.
#[proc_macro_attribute]
pub fn proxy_model(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::proxy_model(attr.into(), item.into()).into()
}

/// The macro's hook catalogue as a slice of `(name, id, params, output)`, for the library's test
/// that it agrees with the library's hook table (both are built from the same file; this proves
/// the two crates were built from the same version of it).
#[doc(hidden)]
#[proc_macro]
pub fn __hook_catalogue(_input: TokenStream) -> TokenStream {
    let entries = catalogue::HOOKS.iter().map(|hook| {
        let (name, id) = (hook.name, hook.id);
        let params = hook.params().unwrap_or_default();
        let output = hook.output();
        quote::quote! { (#name, #id, #params, #output) }
    });
    quote::quote! { &[#(#entries),*] }.into()
}
