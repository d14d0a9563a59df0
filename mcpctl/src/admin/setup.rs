//! From `serve`'s flags to a running admin listener: the checks (`--admin-listen` on loopback
//! unless `--admin-listen-public`, the token file readable), what the API needs to know of the
//! proxy (servers, model, routes, audit log), and the request tap for `/metrics`.

use std::path::Path;
use std::sync::Arc;

use mcp_middleware::request_tap::RequestTap;

use anyhow::{Context as _, bail};
use mcp_middleware::auth::TokenList;
use mcp_middleware::http::Sessions;
use mcpctl::store::project::{DEFAULT_NAMESPACE_SEPARATOR, DEFAULT_PROXY_MODEL};
use mcpctl::store::{Project, Store};
use serde_json::Value;

use super::http::AdminServer;
use super::view::{ProxyFactory, View};
use super::{AdminState, AuditSource, ServerNames, auth::AdminAuth};
use crate::proxy::{ProxyArgs, build, build_following};
use crate::serve::AdminArgs;

/// The admin listener, checked and bound, before the proxy starts.
pub(crate) struct Prepared {
    listener: std::net::TcpListener,
    tokens: TokenList,
    servers: ServerNames,
    project: Option<(Store, String)>,
    model: String,
    restricted: Vec<mcp_middleware::pattern::Pattern>,
    audit: Option<AuditSource>,
    codemode: bool,
    #[cfg(feature = "metrics")]
    metrics: Arc<super::metrics::Metrics>,
}

/// [`Prepared`], with the way to build the admin session's proxy.
pub(crate) struct Ready {
    prepared: Prepared,
    factory: ProxyFactory,
    reloader: Option<Arc<crate::live::Reloader>>,
}

/// The admin listener when `args` ask for one.
pub(crate) fn prepare(
    args: &AdminArgs,
    proxy: &ProxyArgs,
    stored: Option<&Project>,
) -> anyhow::Result<Option<Prepared>> {
    let (Some(listen), Some(tokens)) = (args.admin_listen, &args.admin_tokens) else {
        return Ok(None);
    };
    if !listen.ip().is_loopback() && !args.admin_listen_public {
        bail!(
            "--admin-listen {listen} is not a loopback address: the admin API can end sessions, call tools and rewrite the store; add --admin-listen-public to serve it there anyway"
        );
    }
    let tokens = TokenList::from_file(tokens)
        .with_context(|| format!("--admin-tokens {}", tokens.display()))?;
    let listener = std::net::TcpListener::bind(listen)
        .with_context(|| format!("cannot listen on --admin-listen {listen}"))?;
    listener
        .set_nonblocking(true)
        .context("cannot set up the admin listener")?;
    let servers = match stored {
        Some(project) => ServerNames {
            names: project.spec.servers.clone(),
            separator: project
                .spec
                .namespace_separator
                .clone()
                .unwrap_or_else(|| DEFAULT_NAMESPACE_SEPARATOR.to_owned()),
        },
        None => ServerNames {
            names: vec![ad_hoc_name(proxy)],
            separator: DEFAULT_NAMESPACE_SEPARATOR.to_owned(),
        },
    };
    let model = proxy
        .model
        .clone()
        .or_else(|| stored.and_then(|p| p.spec.proxy_model.clone()))
        .unwrap_or_else(|| DEFAULT_PROXY_MODEL.to_owned());
    let restricted = stored
        .map(|p| {
            p.spec
                .routes
                .restricted
                .iter()
                .flat_map(|r| r.names.iter().cloned())
                .collect()
        })
        .unwrap_or_default();
    let audit = audit_source(proxy, stored)?;
    let project = match stored {
        Some(project) => Some((Store::from_env()?, project.name.clone())),
        None => None,
    };
    let codemode = build(proxy, None)?
        .chain()?
        .layer_names()
        .contains(&"codemode");
    #[cfg(feature = "metrics")]
    let metrics = Arc::new(super::metrics::Metrics::new(servers.clone(), codemode));
    Ok(Some(Prepared {
        listener,
        tokens,
        servers,
        project,
        model,
        restricted,
        audit,
        codemode,
        #[cfg(feature = "metrics")]
        metrics,
    }))
}

/// What names the one upstream of `proxy --url` or `proxy -- CMD`: the command's file name,
/// or the URL's host.
fn ad_hoc_name(proxy: &ProxyArgs) -> String {
    if let Some(url) = &proxy.url {
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        return rest.split(['/', '?']).next().unwrap_or(rest).to_owned();
    }
    proxy
        .command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map_or_else(
            || "upstream".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        )
}

/// The audit model's log, from the project's `config.audit` with `--config`/`--set` on top.
fn audit_source(
    proxy: &ProxyArgs,
    stored: Option<&Project>,
) -> anyhow::Result<Option<AuditSource>> {
    let overrides = crate::model_config::load(proxy.config.as_deref(), &proxy.sets)?;
    let mut config = stored
        .and_then(|p| p.spec.config.get("audit").cloned())
        .unwrap_or(Value::Null);
    if let Some(Value::Object(over)) = overrides.get("audit") {
        if !config.is_object() {
            config = Value::Object(Default::default());
        }
        if let Some(object) = config.as_object_mut() {
            object.extend(over.clone());
        }
    }
    if config.is_null() {
        return Ok(None);
    }
    // Only a config the audit model accepts names a log; a wrong one fails the proxy itself.
    let Ok(config) = serde_json::from_value::<mcp_middleware_models::audit::Config>(config) else {
        return Ok(None);
    };
    Ok(Some(AuditSource {
        path: config.path,
        key: config.key,
        anchor: config.anchor_path,
    }))
}

impl Prepared {
    /// The tap that feeds `/metrics` (none without the `metrics` feature).
    pub(crate) fn tap(&self) -> Option<Arc<dyn RequestTap>> {
        #[cfg(feature = "metrics")]
        return Some(Arc::new(super::metrics::MetricsTap(self.metrics.clone())));
        #[cfg(not(feature = "metrics"))]
        None
    }

    /// With the admin session built from `args` (again each time it restarts), following
    /// the project's live changes through `reloader` (which `POST /api/apply` also triggers).
    pub(crate) fn with_factory(
        self,
        args: Arc<ProxyArgs>,
        reloader: Option<Arc<crate::live::Reloader>>,
    ) -> Ready {
        let tap = self.tap();
        let live = reloader.as_ref().map(|r| r.live().clone());
        let factory: ProxyFactory =
            Arc::new(move || build_following(&args, tap.clone(), live.clone()));
        Ready {
            prepared: self,
            factory,
            reloader,
        }
    }
}

impl Ready {
    /// Starts serving, for the proxy whose sessions are `sessions`, accepting the hosts and
    /// origins `guard` (the MCP front's) accepts.
    pub(crate) async fn start(
        self,
        sessions: Sessions,
        guard: mcp_middleware::http::Guard,
    ) -> anyhow::Result<Running> {
        let p = self.prepared;
        let listener = tokio::net::TcpListener::from_std(p.listener)
            .context("cannot set up the admin listener")?;
        let state = Arc::new(AdminState {
            auth: AdminAuth::new(p.tokens),
            guard,
            sessions,
            view: View::new(self.factory),
            servers: p.servers,
            project: p.project,
            model: p.model,
            restricted: p.restricted,
            audit: p.audit,
            codemode: p.codemode,
            reloader: self.reloader,
            #[cfg(feature = "metrics")]
            metrics: p.metrics,
        });
        let server = super::http::start(listener, state.clone())
            .context("cannot start the admin listener")?;
        crate::cli::say(
            "INFO",
            &format!("admin listening on http://{}/", server.addr),
        );
        Ok(Running { server, state })
    }
}

/// A running admin listener.
pub(crate) struct Running {
    server: AdminServer,
    state: Arc<AdminState>,
}

impl Running {
    /// Stops it and the admin session.
    pub(crate) async fn shutdown(self) {
        self.server.shutdown().await;
        self.state.view.stop().await;
    }
}
