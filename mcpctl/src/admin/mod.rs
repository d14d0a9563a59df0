//! The admin listener (`mcpctl serve ... --admin-listen ADDR --admin-tokens FILE`): a
//! JSON API, `/metrics` and the web UI for the operator of a running `serve`, on an address of
//! its own, every endpoint behind the admin tokens ([`auth`]).
//!
//! - [`http`]: the listener and the router (hyper, as the library's MCP front), with its
//!   bounds (connections, header and body times and sizes) and the MCP front's Host/Origin
//!   check.
//! - [`request`]: the pure parsing of what requests carry (forms, apply bodies).
//! - [`redact`]: what the API's documents hide (secrets, keys, session ids).
//! - [`api`]: the `/api/*` endpoints; [`openapi.json`](openapi.json) documents them.
//! - [`view`]: the admin's own MCP session through the proxy (tools, calls).
//! - [`logs`]: the log tail; [`metrics`]: `/metrics`; [`ui`]: the embedded web UI.

pub(crate) mod api;
pub(crate) mod auth;
pub(crate) mod http;
pub(crate) mod logs;
#[cfg(feature = "metrics")]
pub(crate) mod metrics;
pub(crate) mod redact;
pub(crate) mod request;
pub(crate) mod setup;
pub(crate) mod ui;
pub(crate) mod view;

use std::path::PathBuf;

use mcp_middleware::http::Sessions;
use mcp_middleware::pattern::Pattern;
use mcpctl::store::Store;

/// Which servers a proxy has, and how their names prefix tools and prompts.
#[derive(Debug, Clone)]
pub(crate) struct ServerNames {
    /// The servers' names, in order.
    pub(crate) names: Vec<String>,
    /// What goes between a server's name and a tool's (several servers only).
    pub(crate) separator: String,
}

impl ServerNames {
    /// The server a request about `target` goes to: the one server, the name prefix, or `*`
    /// (every server, or not known).
    pub(crate) fn server_of(&self, target: Option<&str>) -> String {
        if let [only] = self.names.as_slice() {
            return only.clone();
        }
        target
            .and_then(|t| {
                self.names.iter().find(|n| {
                    t.strip_prefix(n.as_str())
                        .is_some_and(|r| r.starts_with(&self.separator))
                })
            })
            .cloned()
            .unwrap_or_else(|| "*".to_owned())
    }
}

/// Where the audit model writes, so `GET /api/audit` can read and verify it.
#[derive(Debug, Clone)]
pub(crate) struct AuditSource {
    pub(crate) path: PathBuf,
    pub(crate) key: mcp_middleware_models::audit::KeySource,
    pub(crate) anchor: Option<PathBuf>,
}

/// What the admin listener serves, gathered by `serve`.
pub(crate) struct AdminState {
    pub(crate) auth: auth::AdminAuth,
    /// The MCP front's Host/Origin check (DNS-rebinding protection), run before anything else.
    pub(crate) guard: mcp_middleware::http::Guard,
    pub(crate) sessions: Sessions,
    pub(crate) view: view::View,
    pub(crate) servers: ServerNames,
    /// The store and the project's name, when serving a project.
    pub(crate) project: Option<(Store, String)>,
    /// The model the proxy runs.
    pub(crate) model: String,
    /// `routes.restricted` names (tools under a per-caller restriction).
    pub(crate) restricted: Vec<Pattern>,
    pub(crate) audit: Option<AuditSource>,
    /// Whether the chain runs code mode (`/api/search`, `/api/inspect`, `/api/execute`).
    pub(crate) codemode: bool,
    /// Reloads the served project after `POST /api/apply`, and knows its servers now
    /// (`crate::live`); `None` for an ad-hoc proxy.
    pub(crate) reloader: Option<std::sync::Arc<crate::live::Reloader>>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: std::sync::Arc<metrics::Metrics>,
}
