// The hook table: the one list of every hook a proxy model can implement.
//
// The library generates from it the hook ids (`HookId`, its names and methods), the marker types
// (`hooks::ToolCall`, ...), the `Layer` methods and the typed dispatch; `mcp-middleware-macros`
// takes this very file in with `include!` and builds the catalogue `#[proxy_model]` checks
// function names and signatures against. Adding a hook is adding a line here (and, for a typed
// hook, what its marker's steps do in `hooks.rs`). The order is `HookId`'s, which is the bit
// order of `HookSet`: keep new hooks at the end of their group.
//
// This file holds one `macro_rules!` and nothing else, since both crates include it. Each line's
// doc comment is the hook's documentation, on its `Layer` method and its `HookId` variant:
// when it runs, what it does by default, how to answer without going further, and when it does
// not run.
//
// `$callback` receives four groups:
// - `typed`: `Id, fn_name, "method": Params => Output;` a typed request hook, with a marker type
//   `hooks::Id` implementing `RequestHook`;
// - `raw`: `Id, fn_name: Params => Output;` a hook that takes `next` but is not tied to one
//   method;
// - `transform`: `Id, fn_name;` the content transform, `(ctx, Content) -> HookResult<String>`;
// - `session`: `Id, fn_name;` a session event, `(ctx) -> HookResult<()>`.

/// Calls `$callback! { typed { .. } raw { .. } transform { .. } session { .. } }` with the hook
/// table.
macro_rules! for_each_hook {
    ($callback:ident) => {
        $callback! {
            typed {
                /// `initialize`: the client opens a 2025-11-25 session.
                ///
                /// Runs once per session, when the client's `initialize` arrives, outermost model
                /// first; `next` sends it to the upstream and returns the upstream's result (its
                /// capabilities, server info and instructions), which the hook may change.
                /// Default: forwarded as it is. Short-circuit: return a result without calling
                /// `next`; the upstream then never sees the client's `initialize`.
                ///
                /// Does not run for the `initialize` the proxy replays to an upstream it
                /// restarted (the client does not see that one), nor for the `initialize` the
                /// proxy sends an older upstream for a 2026-07-28 client (bridged sessions; see
                /// `on_discover`).
                Initialize, on_initialize, "initialize": InitializeRequestParams => InitializeResult;
                /// `server/discover`: a 2026-07-28 client asks what the server offers.
                ///
                /// Runs whenever the client sends `server/discover` to an upstream that speaks
                /// 2026-07-28; `next` forwards it. Default: forwarded. Short-circuit: return a
                /// result without calling `next`.
                ///
                /// Does not run when the session is bridged (a 2026-07-28 client in front of a
                /// 2025-11-25 upstream): the proxy answers `server/discover` itself from the
                /// upstream's `initialize` result, and no model sees the request.
                Discover, on_discover, "server/discover": DiscoverRequestParams => DiscoverResult;
                /// `tools/list`: the client lists the tools.
                ///
                /// Runs on every `tools/list`, outermost model first; `next` returns the listing of
                /// the models inside (their synthetic tools included) and the upstream. Hidden
                /// tools are removed before and after the hooks run. Default: the listing passes
                /// as it is. Short-circuit: return a listing without calling `next` (the
                /// upstream is not asked). Filtering by name is cheap: the schemas of an
                /// unchanged listing are shared, not copied, and written back as the upstream's
                /// own text unless a hook replaces them.
                ToolsList, on_tools_list, "tools/list": Option<PaginatedRequestParams> => ListToolsResult;
                /// `tools/call`: the client calls a tool.
                ///
                /// Runs on every call of a tool routed through the models, outermost model first;
                /// `next` calls the inner models (a model's own synthetic tools are answered
                /// just inside its hooks) and the upstream. Default: the call is forwarded.
                /// Short-circuit: return a `CallToolResult` (a tool error, say) or an error
                /// without calling `next`; the upstream is not called.
                ///
                /// Does not run for a pass-through tool (routes: it goes straight to the
                /// upstream, only observers see it) nor for a hidden one (refused before any
                /// hook; observers record `rejected`).
                ToolCall, on_tool_call, "tools/call": CallToolRequestParams => CallToolResult;
                /// `resources/list`: the client lists the resources.
                ///
                /// Runs on every `resources/list`; `next` returns the inner models' and the
                /// upstream's listing. Default: passed as it is. Short-circuit: return a listing
                /// without calling `next`.
                ResourcesList, on_resources_list, "resources/list": Option<PaginatedRequestParams> => ListResourcesResult;
                /// `resources/templates/list`: the client lists the resource templates.
                ///
                /// Runs on every `resources/templates/list`; `next` returns the upstream's
                /// listing. Default: passed as it is. Short-circuit: return a listing without
                /// calling `next`.
                ResourceTemplatesList, on_resource_templates_list, "resources/templates/list": Option<PaginatedRequestParams> => ListResourceTemplatesResult;
                /// `resources/read`: the client reads a resource.
                ///
                /// Runs on every read of a resource routed through the models; `next` reads it
                /// from the upstream, then the inner models' `transform_content` has run on its
                /// text. Default: forwarded. Short-circuit: return contents without calling
                /// `next`. Does not run for pass-through or hidden resources.
                ResourceRead, on_resource_read, "resources/read": ReadResourceRequestParams => ReadResourceResult;
                /// `resources/subscribe`: the client subscribes to a resource's updates.
                ///
                /// Default: forwarded. Short-circuit: return `EmptyResult` without calling `next`
                /// (the upstream then sends no updates for it).
                ResourceSubscribe, on_resource_subscribe, "resources/subscribe": SubscribeRequestParams => EmptyResult;
                /// `resources/unsubscribe`: the client ends a subscription.
                ///
                /// Default: forwarded. Short-circuit: return `EmptyResult` without calling `next`.
                ResourceUnsubscribe, on_resource_unsubscribe, "resources/unsubscribe": UnsubscribeRequestParams => EmptyResult;
                /// `prompts/list`: the client lists the prompts.
                ///
                /// Default: the upstream's listing as it is. Short-circuit: return a listing
                /// without calling `next`.
                PromptsList, on_prompts_list, "prompts/list": Option<PaginatedRequestParams> => ListPromptsResult;
                /// `prompts/get`: the client gets a prompt.
                ///
                /// `next` gets it from the upstream, then the inner models' `transform_content`
                /// has run on its messages. Default: forwarded. Short-circuit: return a prompt
                /// without calling `next`.
                PromptGet, on_prompt_get, "prompts/get": GetPromptRequestParams => GetPromptResult;
                /// `completion/complete`: the client asks for argument completions.
                ///
                /// Default: forwarded. Short-circuit: return completions without calling `next`.
                Completion, on_completion, "completion/complete": CompleteRequestParams => CompleteResult;
                /// `logging/setLevel`: a 2025-11-25 client sets the upstream's log level.
                ///
                /// Default: forwarded. Short-circuit: return `EmptyResult` without calling `next`.
                SetLevel, on_set_level, "logging/setLevel": SetLevelRequestParams => EmptyResult;
            }
            raw {
                /// Any client request, known or not, as JSON.
                ///
                /// Runs on every request the client sends through the models, before any typed
                /// hook: the `on_request` hooks of all models run first, in chain order, and the
                /// last one's `next` enters the typed hooks of the request's method (if any),
                /// then the upstream. Default: passed on. Short-circuit: return a result without
                /// calling `next`. Params that do not fit the typed hook's type are refused with
                /// `-32602 Invalid params` before any typed hook runs.
                ///
                /// Does not run for requests the proxy answers or sends itself (a bridged
                /// `server/discover`, a replayed `initialize` after a restart) nor for
                /// pass-through routes.
                Request, on_request: RawRequest => serde_json::Value;
                /// A notification from the client (`notifications/initialized`, progress,
                /// cancelled, roots changed, custom).
                ///
                /// Runs as the client sent it; `next` sends it upstream (ids and progress tokens
                /// are mapped after the hooks). Default: forwarded. Short-circuit (drop it):
                /// return `Ok(())` without calling `next`.
                ClientNotification, on_client_notification: RawNotification => ();
                /// A notification from the upstream (list changed, resource updated, log
                /// messages, progress, custom).
                ///
                /// Runs as the client will see it (progress tokens already mapped to the
                /// client's); `next` delivers it. Default: delivered. Short-circuit (drop it):
                /// return `Ok(())` without calling `next`. Notifications a model sends itself
                /// (`ctx.downstream()`) do not pass here.
                ServerNotification, on_server_notification: RawNotification => ();
                /// A request from the upstream to the client (sampling, elicitation, roots,
                /// custom).
                ///
                /// `next` asks the client and returns its answer. Default: asked of the client.
                /// Short-circuit: answer the upstream by returning without calling `next`.
                ServerRequest, on_server_request: RawRequest => serde_json::Value;
            }
            transform {
                /// `transform_content(ctx, content: Content) -> HookResult<String>`: rewrites one
                /// text part on its way back to the client.
                ///
                /// Runs on every text part of a tool result, resource read and prompt message as
                /// it comes back through the model's place in the chain (innermost model first),
                /// with the content's kind and MIME type; images, audio and blobs are not given
                /// to it. Default: the text as it is. There is nothing to short-circuit: the
                /// result has arrived. Does not run on pass-through routes.
                TransformContent, transform_content;
            }
            session {
                /// `on_session_start(ctx) -> HookResult<()>`: a client connected.
                ///
                /// Runs once per session, outermost model first, before the session's first
                /// hooked request. Default: nothing. Nothing to short-circuit; an error is logged.
                ///
                /// With a shared store (`serve --store`) it runs on the replica that creates the
                /// session only, not again on a replica that restores it: what it set up in the
                /// model states comes from the store. Work that must happen on every replica
                /// serving the session (a process-local resource) belongs in the hook that needs
                /// it, done on first use and keyed by `ctx.session_id()` (the same on every
                /// replica); `on_session_end` runs on each replica whose copy of the session
                /// ends, so it can release it there.
                SessionStart, on_session_start;
                /// `on_session_end(ctx) -> HookResult<()>`: the client left.
                ///
                /// Runs once, after the session's last request, outermost model first. Default:
                /// nothing. An error is logged. Does not run if the process is killed. With a
                /// shared store it runs on each replica whose copy of the session ends (idle on
                /// that replica, ended by `DELETE` anywhere, the replica shutting down), while the
                /// session may go on elsewhere.
                SessionEnd, on_session_end;
            }
        }
    };
}

// The library and the macro crate each name the macro by path.
#[allow(unused_imports)]
pub(crate) use for_each_hook;
