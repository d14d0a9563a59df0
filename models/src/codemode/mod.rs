//! `codemode`: the upstream tools behind four tools, called from TypeScript.
//!
//! One concept per file: [`naming`] (namespace and method identifiers), [`catalog`] (which tool
//! belongs to which namespace), [`search`] (ranking), [`declare`] (TypeScript from JSON Schema),
//! [`script`] (type stripping, reference checks, positions), [`sandbox`] (the QuickJS runtime),
//! [`execute`] (a snippet's run and its inner calls) and [`tools`] (the four tools' answers).

mod admission;
mod catalog;
mod declare;
mod execute;
mod naming;
mod sandbox;
mod script;
mod search;
mod tools;
mod typecheck;

#[cfg(test)]
mod tests;

use mcp_middleware::proxy_model;

/// Code mode: four tools (`overview`, `search_tools`, `inspect`, `execute`) instead of the
/// servers' own, which are called from TypeScript run in a sandbox.
///
/// `execute` runs a TypeScript snippet in an embedded QuickJS sandbox (no file
/// system, network, environment, timers or modules; memory, time and call limits) where each
/// server is a global namespace object and each tool an async method; the calls go through the
/// rest of the chain below code mode (routes, the models below, observers), so a hidden tool
/// does not exist in code. Synthetic tools of models below are under the namespace `proxy`.
/// The tools code sees follow live reloads: a reload that hides a tool or changes the servers
/// reaches code mode from the next call on.
///
/// Over the whole process, at most `maxConcurrentExecutes` sandboxes run at once and their
/// `memoryBytes` limits add up to at most `totalMemoryBytes`; an `execute` that finds no room
/// waits `executeQueueMs`, then is refused with an error naming the limit to raise. Every text
/// an `execute` returns (result, logs, error) is cut to `maxOutputBytes`.
///
/// Naming: a server's namespace is its name with characters other than letters, digits, `_`
/// and `$` made `_` (`upstream` for the one server of an ad-hoc proxy); a tool's method is its
/// name when that is an identifier, else its name in camelCase (`get-sum` -> `getSum`);
/// collisions get `_2`, `_3`, ... by name order. The original name works by index:
/// `everything["get-sum"]({a: 1, b: 2})`.
#[proxy_model]
pub mod codemode {
    use std::sync::Arc;
    use std::time::Duration;

    use mcp_middleware::Configuration;
    use mcp_middleware::prelude::*;
    use mcp_middleware::types::{InitializeRequestParams, InitializeResult};
    use serde_json::{Value, json};

    use super::catalog::Catalog;
    use super::execute::{self, Budget};
    use super::tools::{self, OverviewFacts, ServerStatus};
    use super::typecheck::Checker;

    /// The limits of one `execute` (camelCase in a project).
    #[derive(Debug, Clone, Deserialize, JsonSchema)]
    #[serde(default, rename_all = "camelCase", deny_unknown_fields)]
    pub struct Config {
        /// How long a snippet may run, in milliseconds, its tool calls included.
        pub timeout_ms: u64,
        /// The most memory the sandbox may allocate, in bytes.
        pub memory_bytes: usize,
        /// The most tool calls one snippet may make.
        pub max_tool_calls: usize,
        /// The most bytes of result (and, separately, of captured logs) returned; longer output
        /// is cut and says so.
        pub max_output_bytes: usize,
        /// The most tool calls of one snippet in flight at once; more wait their turn.
        pub max_concurrent_calls: usize,
        /// The most `execute`s running at once in the whole process, over every session (each
        /// runs a sandbox on a thread of its own); more wait their turn for `executeQueueMs`,
        /// then are refused. Default (unset): the number of CPUs.
        pub max_concurrent_executes: Option<usize>,
        /// The most memory the `memoryBytes` limits of the `execute`s running at once in the
        /// whole process may add up to; more wait their turn for `executeQueueMs`, then are
        /// refused. Default (unset): 4 x `memoryBytes`.
        pub total_memory_bytes: Option<usize>,
        /// How long, in milliseconds, an `execute` waits for a turn when
        /// `maxConcurrentExecutes` or `totalMemoryBytes` is reached before it is refused.
        pub execute_queue_ms: u64,
        /// The TypeScript checker: `""` (default) finds `tsgo`, then `tsc`, on `PATH`; `"off"`
        /// checks nothing; anything else is the checker's path. Without one, snippets run
        /// unchecked and `overview` says so.
        pub type_checker: String,
    }

    impl Config {
        /// `maxConcurrentExecutes`, or its default: a sandbox per CPU.
        fn concurrent_executes(&self) -> usize {
            self.max_concurrent_executes.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(4, std::num::NonZero::get)
            })
        }

        /// `totalMemoryBytes`, or its default: room for four sandboxes at their limit.
        fn total_memory(&self) -> usize {
            self.total_memory_bytes
                .unwrap_or_else(|| self.memory_bytes.saturating_mul(4))
        }
    }

    /// The process-wide counters of code mode's sandboxes, across every session and project.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Sandboxes {
        /// Sandboxes running now.
        pub running: usize,
        /// The most sandboxes that ever ran at once in this process.
        pub peak_running: usize,
        /// The sum of the memory limits of the sandboxes running now, in bytes.
        pub reserved_bytes: usize,
        /// `execute`s refused for want of a turn (or room) since the process started.
        pub refused: usize,
    }

    /// How many sandboxes run now, and at most ran at once (what `maxConcurrentExecutes` and
    /// `totalMemoryBytes` bound).
    pub fn sandboxes() -> Sandboxes {
        let usage = super::admission::snapshot();
        Sandboxes {
            running: usage.running,
            peak_running: usage.peak_running,
            reserved_bytes: usage.reserved_bytes,
            refused: usage.refused,
        }
    }

    impl Default for Config {
        fn default() -> Self {
            Self {
                timeout_ms: 30_000,
                memory_bytes: 64 * 1024 * 1024,
                max_tool_calls: 100,
                max_output_bytes: 40_000,
                max_concurrent_calls: 8,
                max_concurrent_executes: None,
                total_memory_bytes: None,
                execute_queue_ms: 5_000,
                type_checker: String::new(),
            }
        }
    }

    /// What a session knows of its servers. A shared store carries the servers' description;
    /// the catalog is a cache, built again from a listing on the replica that needs it.
    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    pub struct State {
        /// The per-server view, and what it was built under (see `catalog`).
        #[serde(skip)]
        catalog: Option<(CatalogKey, Arc<Catalog>)>,
        /// The servers' names and instructions, from `initialize`.
        server_info: Option<(String, Option<String>, Option<String>)>,
    }

    /// What a catalog was built under: it is used again only while these are the same.
    #[derive(Debug, PartialEq)]
    struct CatalogKey {
        configuration: Configuration,
        servers: Vec<String>,
        separator: Option<String>,
    }

    fn name() -> &'static str {
        <Model as ProxyModel>::DESCRIPTOR.name
    }

    /// Remembers the servers' description for `overview`.
    pub async fn on_initialize(
        ctx: &Context,
        params: InitializeRequestParams,
        next: Next<'_, hooks::Initialize>,
    ) -> HookResult<InitializeResult> {
        let result = next.run(ctx, params).await?;
        let info = (
            result.server_info.name.clone(),
            result.server_info.title.clone(),
            result.instructions.clone(),
        );
        ctx.state(|state: &mut State| state.server_info = Some(info))?;
        Ok(result)
    }

    /// Exactly the four tools.
    pub async fn on_tools_list(
        _ctx: &Context,
        _params: Option<PaginatedRequestParams>,
        _next: Next<'_, hooks::ToolsList>,
    ) -> HookResult<ListToolsResult> {
        Ok(ListToolsResult::with_all_items(tools::definitions()))
    }

    /// A change of the tools below makes the next call build the view again.
    pub async fn on_server_notification(
        ctx: &Context,
        notification: RawNotification,
        next: Next<'_, hooks::ServerNotification>,
    ) -> HookResult<()> {
        if notification.method == "notifications/tools/list_changed" {
            ctx.state(|state: &mut State| state.catalog = None)?;
        }
        next.run(ctx, notification).await
    }

    /// The four tools; any other name is an error (the upstream's tools are called from code).
    pub async fn on_tool_call(
        ctx: &Context,
        params: CallToolRequestParams,
        _next: Next<'_, hooks::ToolCall>,
    ) -> HookResult<CallToolResult> {
        let arguments = Value::Object(params.arguments.clone().unwrap_or_default());
        match params.name.as_ref() {
            tools::OVERVIEW => overview(ctx).await,
            tools::SEARCH => {
                let Some(query) = arguments.get("query").and_then(Value::as_str) else {
                    return Ok(tools::error(
                        "search_tools needs `query`, a string: words describing the tool you need"
                            .into(),
                    ));
                };
                let limit = match arguments.get("limit") {
                    None | Some(Value::Null) => 10,
                    Some(limit) => match limit.as_u64() {
                        Some(limit) if limit > 0 => limit as usize,
                        _ => {
                            return Ok(tools::error(format!(
                                "search_tools: `limit` must be a positive integer, not {limit}"
                            )));
                        }
                    },
                };
                let catalog = catalog(ctx).await?;
                Ok(tools::search(&catalog, query, limit))
            }
            tools::INSPECT => {
                let names: Option<Vec<String>> = arguments
                    .get("names")
                    .and_then(Value::as_array)
                    .map(|names| {
                        names
                            .iter()
                            .filter_map(|n| n.as_str().map(str::to_owned))
                            .collect()
                    });
                let Some(names) = names.filter(|n| !n.is_empty()) else {
                    return Ok(tools::error(
                        "inspect needs `names`, a list of tool names like `everything.echo`".into(),
                    ));
                };
                let catalog = catalog(ctx).await?;
                Ok(tools::inspect(&catalog, &names))
            }
            tools::EXECUTE => {
                let Some(code) = arguments.get("code").and_then(Value::as_str) else {
                    return Ok(tools::error(
                        "execute needs `code`, a string: the body of an async function".into(),
                    ));
                };
                let dry_run = match arguments.get("dryRun") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(flag)) => *flag,
                    Some(other) => {
                        return Ok(tools::error(format!(
                            "execute: `dryRun` must be a boolean, not {other}"
                        )));
                    }
                };
                let config = ctx.config::<Config>()?;
                let budget = Budget {
                    timeout: Duration::from_millis(config.timeout_ms),
                    memory_bytes: config.memory_bytes,
                    max_tool_calls: config.max_tool_calls,
                    max_output_bytes: config.max_output_bytes,
                    max_concurrent_calls: config.max_concurrent_calls,
                };
                let admission = super::admission::Ask {
                    memory_bytes: config.memory_bytes,
                    max_concurrent: config.concurrent_executes(),
                    total_memory_bytes: config.total_memory(),
                    queue: Duration::from_millis(config.execute_queue_ms),
                };
                let catalog = catalog(ctx).await?;
                let checker = Checker::find(&config.type_checker);
                let run = execute::Run {
                    model: name(),
                    catalog: &catalog,
                    checker: checker.as_ref(),
                    budget,
                    admission,
                    meta: params.meta,
                };
                Ok(execute::execute(ctx, run, code, dry_run).await)
            }
            other => Ok(tools::error(format!(
                "unknown tool `{other}`: this proxy offers `overview`, `search_tools`, `inspect` \
                 and `execute`; call the servers' tools from code in `execute`"
            ))),
        }
    }

    /// The session's per-server view of the tools below: the one built before while the
    /// session's configuration (its routes and servers, which live reloads change) and the
    /// project's servers are the same and no server said its tools changed, else built again
    /// from a listing (so a tool hidden by a reload is gone from the next call on).
    async fn catalog(ctx: &Context) -> HookResult<Arc<Catalog>> {
        let key = CatalogKey {
            configuration: ctx.configuration(),
            servers: ctx.project().map(|p| p.servers.clone()).unwrap_or_default(),
            separator: ctx.project().and_then(|p| p.separator.clone()),
        };
        let cached = ctx.state(|state: &mut State| match &state.catalog {
            Some((built_under, catalog)) if *built_under == key => Some(catalog.clone()),
            _ => None,
        })?;
        if let Some(catalog) = cached {
            return Ok(catalog);
        }
        let below = ctx.below(name());
        let mut listed = Vec::new();
        let mut cursor = None;
        // Bounded, so a server that always returns a cursor cannot keep this going.
        for _ in 0..100 {
            let params =
                cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
            let page = below.list_tools(params).await?;
            listed.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        let synthetic = below.synthetic_tools();
        let catalog = Arc::new(Catalog::build(&listed, ctx.project(), &synthetic));
        ctx.state(|state: &mut State| state.catalog = Some((key, catalog.clone())))?;
        Ok(catalog)
    }

    async fn overview(ctx: &Context) -> HookResult<CallToolResult> {
        let config = ctx.config::<Config>()?;
        let facts = OverviewFacts {
            type_checking: Checker::find(&config.type_checker).map(|c| c.describe()),
            limits: json!({
                "timeoutMs": config.timeout_ms,
                "memoryBytes": config.memory_bytes,
                "maxToolCalls": config.max_tool_calls,
                "maxOutputBytes": config.max_output_bytes,
                "maxConcurrentCalls": config.max_concurrent_calls,
                "maxConcurrentExecutes": config.concurrent_executes(),
                "totalMemoryBytes": config.total_memory(),
                "executeQueueMs": config.execute_queue_ms,
            }),
        };
        let info = ctx.state(|state: &mut State| state.server_info.clone())?;
        let catalog = match catalog(ctx).await {
            Ok(catalog) => catalog,
            Err(error) => {
                // Nothing answered the listing: every server is reported with the reason.
                let servers = server_names(ctx)
                    .into_iter()
                    .map(|(namespace, server)| ServerStatus {
                        namespace,
                        server,
                        summary: String::new(),
                        tools: 0,
                        error: Some(error.message.to_string()),
                    })
                    .collect::<Vec<_>>();
                return Ok(tools::overview(&servers, &facts));
            }
        };
        let mut servers = Vec::new();
        for namespace in &catalog.namespaces {
            let summary = summary(info.as_ref(), &namespace.server, catalog.namespaces.len());
            let error = if namespace.tools.is_empty() {
                probe(ctx, &namespace.server).await
            } else {
                None
            };
            servers.push(ServerStatus {
                namespace: namespace.name.clone(),
                server: namespace.server.clone(),
                summary,
                tools: namespace.tools.len(),
                error,
            });
        }
        Ok(tools::overview(&servers, &facts))
    }

    /// (namespace, server) of every server, for when the listing failed.
    fn server_names(ctx: &Context) -> Vec<(String, String)> {
        let catalog = Catalog::build(&[], ctx.project(), &[]);
        catalog
            .namespaces
            .into_iter()
            .map(|ns| (ns.name, ns.server))
            .collect()
    }

    /// One line about `server`: its title, or the first line of its instructions.
    fn summary(
        info: Option<&(String, Option<String>, Option<String>)>,
        server: &str,
        namespaces: usize,
    ) -> String {
        if server == super::naming::PROXY {
            return "synthetic tools of the proxy's models".into();
        }
        let Some((name, title, instructions)) = info else {
            return String::new();
        };
        let instructions = instructions.as_deref().unwrap_or_default();
        // Several servers: the merged instructions are blocks headed "Server `name`:".
        let marker = format!("Server `{server}`:\n");
        let own = match instructions.find(&marker) {
            Some(at) => instructions[at + marker.len()..]
                .split("\n\nServer `")
                .next()
                .unwrap_or_default(),
            None if namespaces <= 2 && !instructions.starts_with("Server `") => instructions,
            None => "",
        };
        // The first line of prose: Markdown headings are titles, not summaries.
        let line = own
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or("");
        let title = if namespaces <= 2 {
            title.clone().unwrap_or_else(|| name.clone())
        } else {
            String::new()
        };
        let mut text = match (title.is_empty(), line.is_empty()) {
            (false, false) => format!("{title}: {line}"),
            (false, true) => title,
            (true, false) => line.to_owned(),
            (true, true) => String::new(),
        };
        if text.chars().count() > 160 {
            text = text.chars().take(157).collect::<String>() + "...";
        }
        text
    }

    /// Why a project server without tools is down, if it is: a call to its empty tool name
    /// reaches the merger, which answers for a server that is down (outside the chain, so no
    /// observer records the probe).
    async fn probe(ctx: &Context, server: &str) -> Option<String> {
        let separator = ctx.project()?.separator.clone()?;
        let params = CallToolRequestParams::new(format!("{server}{separator}"));
        match ctx.upstream().call_tool(params).await {
            Err(error) if error.message.contains("unavailable") => Some(error.message.to_string()),
            _ => None,
        }
    }
}
