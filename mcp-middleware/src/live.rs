//! Live changes: a running proxy takes a new configuration (servers, routes, model, project)
//! without a restart.
//!
//! A [`Live`] handle holds the proxy's current *generation*: its upstream, its composed chain,
//! its project, and its routes. Give the handle to the proxy in
//! [`SessionOptions::live`](crate::SessionOptions::live), install the first generation with
//! [`Live::reload`], serve, and call [`Live::reload`] again with each new
//! [`Proxy`](crate::Proxy):
//!
//! ```no_run
//! use mcp_middleware::{Proxy, SessionOptions, live::Live, routing::Routes, upstream::StdioServer};
//!
//! # fn run() -> Result<(), mcp_middleware::ProxyError> {
//! let live = Live::new();
//! let mut options = SessionOptions::default();
//! options.live = Some(live.clone());
//! let proxy = Proxy::new(StdioServer::new("server-a")).options(options.clone());
//! live.reload(&proxy)?; // generation 1
//! // ... serve `proxy`; later, from another thread:
//! let next = Proxy::new(StdioServer::new("server-b"))
//!     .routes(Routes::new().hide("admin-*"))
//!     .options(options);
//! let reloaded = live.reload(&next)?;
//! assert!(reloaded.servers_changed && reloaded.routes_changed);
//! # Ok(())
//! # }
//! ```
//!
//! What a reload does, in this order:
//! 1. The next generation is built and validated whole
//!    ([`Proxy::chain`](crate::Proxy::chain): the model, every config, the registry). A proxy
//!    that does not validate is refused with its error and nothing changes.
//! 2. The routes are swapped, for every session at once: every chain that follows this handle
//!    reads its routes from one shared slot, so an entry newly hidden is refused in open sessions
//!    from this moment, before any of them hears of the change (fail closed).
//! 3. The generation is published. New sessions start from it (its upstream, chain and project).
//!    Each open session compares its upstream with the new one (bound to its own caller): when
//!    both are sets of several servers, only the servers added, removed or changed start or stop
//!    (a changed one gets the client's handshake replayed; requests in flight to a stopped one
//!    get a clear error naming the change) and the others go on untouched; any other difference
//!    stops the whole upstream the same way, starts the new one and replays the client's
//!    handshake to it; then it sends the
//!    client `notifications/tools/list_changed`, `prompts/list_changed` and
//!    `resources/list_changed` when the servers or the routes changed.
//!
//! Open sessions keep their model chain and its per-session state: a new `proxyModel` or model
//! config applies to sessions started after the reload (switching a session's models midway
//! would drop the state its client relies on, such as an opened gate).
//!
//! Why one shared slot for routes and a `watch` channel for the rest: routes are read on every
//! request and must change everywhere at the same instant, which one `RwLock` read per routed
//! request gives for nothing measurable; upstreams belong to each session's own task, which must
//! do the restart itself, and a `watch` channel wakes every session once with only the newest
//! generation (a session that missed one goes straight to the latest).

use std::fmt;
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::chain::{Chain, RouterSlot};
use crate::error::ProxyError;
use crate::project::Project;
use crate::routing::{Router, Routes};
use crate::upstream::Upstream;
use crate::upstream::token_exchange::Caller;

/// The handle to a running proxy's configuration: cheap to clone, shared by every session.
/// See the [module docs](self).
#[derive(Clone)]
pub struct Live {
    shared: Arc<Shared>,
    /// The caller a session's upstream is bound to (token exchange), for a session's own copy.
    caller: Option<Caller>,
}

struct Shared {
    routes: RouterSlot,
    generation: watch::Sender<Arc<Generation>>,
    /// Held while a reload compares and publishes, so two reloads cannot interleave.
    reloading: Mutex<()>,
}

/// One configuration of the proxy.
pub(crate) struct Generation {
    pub(crate) number: u64,
    /// `None` before the first [`Live::reload`].
    pub(crate) installed: Option<Installed>,
    /// Which lists open sessions are told changed.
    pub(crate) lists: Lists,
}

/// What a generation runs.
pub(crate) struct Installed {
    pub(crate) server: Upstream,
    pub(crate) chain: Arc<Chain>,
    pub(crate) project: Option<Arc<Project>>,
    routes: Routes,
    model: Option<&'static str>,
    configs: Map<String, Value>,
}

/// Which of the client's lists a reload may have changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lists {
    pub(crate) tools: bool,
    pub(crate) prompts: bool,
    pub(crate) resources: bool,
}

impl Lists {
    /// The list_changed notifications for these lists.
    pub(crate) fn notifications(self) -> impl Iterator<Item = &'static str> {
        [
            (self.tools, "notifications/tools/list_changed"),
            (self.prompts, "notifications/prompts/list_changed"),
            (self.resources, "notifications/resources/list_changed"),
        ]
        .into_iter()
        .filter_map(|(on, method)| on.then_some(method))
    }
}

/// What a [`Live::reload`] changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    /// The generation now running (1 for the first configuration installed).
    pub generation: u64,
    /// Whether this was the first configuration.
    pub first: bool,
    /// Whether the upstream side (servers, their commands, env, URLs, the separator) changed:
    /// open sessions change theirs (a set of several servers only the servers that differ).
    pub servers_changed: bool,
    /// Whether the routes changed: open sessions follow them at once.
    pub routes_changed: bool,
    /// Whether the model or a model's config changed: sessions started from now on run it.
    pub model_changed: bool,
    /// Whether the project (prompts, servers' names, LLM endpoint) changed: for new sessions.
    pub project_changed: bool,
}

impl Reloaded {
    /// Whether nothing changed (the reload published nothing).
    pub fn is_unchanged(&self) -> bool {
        !self.first
            && !self.servers_changed
            && !self.routes_changed
            && !self.model_changed
            && !self.project_changed
    }
}

impl fmt::Display for Reloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first {
            return write!(f, "generation {}: the first configuration", self.generation);
        }
        if self.is_unchanged() {
            return write!(f, "generation {}: unchanged", self.generation);
        }
        let changed: Vec<&str> = [
            (self.servers_changed, "servers"),
            (self.routes_changed, "routes"),
            (self.model_changed, "model"),
            (self.project_changed, "project"),
        ]
        .into_iter()
        .filter_map(|(on, what)| on.then_some(what))
        .collect();
        write!(
            f,
            "generation {}: {} changed",
            self.generation,
            changed.join(", ")
        )
    }
}

impl fmt::Debug for Live {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Live")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl Default for Live {
    fn default() -> Self {
        Self::new()
    }
}

impl Live {
    /// A handle with no configuration yet: install the first with [`Live::reload`] before
    /// serving.
    pub fn new() -> Self {
        let (generation, _) = watch::channel(Arc::new(Generation {
            number: 0,
            installed: None,
            lists: Lists::default(),
        }));
        Self {
            shared: Arc::new(Shared {
                routes: Arc::new(RwLock::new(None)),
                generation,
                reloading: Mutex::new(()),
            }),
            caller: None,
        }
    }

    /// The generation running (0 before the first [`Live::reload`]).
    pub fn generation(&self) -> u64 {
        self.shared.generation.borrow().number
    }

    /// Makes a proxy's configuration, `parts`, the running one once `chain` (which validates
    /// it whole, [`Proxy::chain`](crate::Proxy::chain)) has built its chain: what
    /// [`Live::reload`] does (in `crate::proxy`, which sits above this module).
    pub(crate) fn install(
        &self,
        parts: Parts<'_>,
        chain: impl FnOnce() -> Result<Chain, ProxyError>,
    ) -> Result<Reloaded, ProxyError> {
        let _one = self
            .shared
            .reloading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Validated whole before anything changes.
        let chain = Arc::new(chain()?.follow_routes(self.shared.routes.clone()));
        let router = Router::new(parts.routes, parts.server).map(Arc::new);
        let next = Installed {
            server: parts.server.clone(),
            chain,
            project: parts.project.cloned(),
            routes: parts.routes.clone(),
            model: parts.model.map(|m| m.name),
            configs: parts.configs.clone(),
        };
        let previous = self.shared.generation.borrow().clone();
        let number = previous.number + 1;
        let report = match &previous.installed {
            None => Reloaded {
                generation: number,
                first: true,
                servers_changed: false,
                routes_changed: false,
                model_changed: false,
                project_changed: false,
            },
            Some(old) => Reloaded {
                generation: number,
                first: false,
                servers_changed: old.server != next.server,
                routes_changed: old.routes != next.routes,
                model_changed: old.model != next.model || old.configs != next.configs,
                project_changed: old.project != next.project,
            },
        };
        if report.is_unchanged() {
            return Ok(Reloaded {
                generation: previous.number,
                ..report
            });
        }
        // Routes first, for every session at once: nothing newly hidden is served from here
        // on, before any session is told that anything changed.
        match self.shared.routes.write() {
            Ok(mut slot) => *slot = router,
            Err(poisoned) => *poisoned.into_inner() = router,
        }
        let changed = report.servers_changed || report.routes_changed;
        let lists = Lists {
            tools: changed,
            prompts: changed,
            resources: changed,
        };
        self.shared.generation.send_replace(Arc::new(Generation {
            number,
            installed: Some(next),
            lists,
        }));
        Ok(report)
    }

    /// The slot following chains read their routes from.
    pub(crate) fn router_slot(&self) -> RouterSlot {
        self.shared.routes.clone()
    }

    /// The generation running.
    pub(crate) fn current(&self) -> Arc<Generation> {
        self.shared.generation.borrow().clone()
    }

    /// This handle for a session whose upstream is bound to `caller` (token exchange).
    pub(crate) fn for_caller(&self, caller: &Caller) -> Self {
        Self {
            shared: self.shared.clone(),
            caller: Some(caller.clone()),
        }
    }

    /// `server` as this handle's session runs it (bound to its caller).
    fn bind(&self, server: &Upstream) -> Upstream {
        match &self.caller {
            Some(caller) => server.for_caller(caller),
            None => server.clone(),
        }
    }

    /// A session's subscription, for a session that runs `server`: when that is not the
    /// running generation's upstream (a reload came between the session's start and now), the
    /// session hears of the running generation at once.
    pub(crate) fn follow(&self, server: &Upstream) -> Follower {
        let mut generations = self.shared.generation.subscribe();
        let stale = generations
            .borrow_and_update()
            .installed
            .as_ref()
            .is_some_and(|installed| self.bind(&installed.server) != *server);
        if stale {
            generations.mark_changed();
        }
        Follower {
            live: self.clone(),
            generations,
        }
    }
}

/// One session's subscription to the generations.
pub(crate) struct Follower {
    live: Live,
    generations: watch::Receiver<Arc<Generation>>,
}

/// A new generation, as one session sees it.
pub(crate) struct Reload {
    pub(crate) number: u64,
    /// The session's upstream in the new generation (bound to its caller).
    pub(crate) server: Option<Upstream>,
    pub(crate) lists: Lists,
}

/// The next generation for `follower`; never resolves without one (or once the handle is
/// gone).
pub(crate) async fn next(follower: &mut Option<Follower>) -> Reload {
    let Some(following) = follower else {
        return std::future::pending().await;
    };
    if following.generations.changed().await.is_err() {
        *follower = None;
        return std::future::pending().await;
    }
    let generation = following.generations.borrow_and_update().clone();
    Reload {
        number: generation.number,
        server: generation
            .installed
            .as_ref()
            .map(|installed| following.live.bind(&installed.server)),
        lists: generation.lists,
    }
}

/// A proxy's configuration as a reload reads it.
pub(crate) struct Parts<'p> {
    pub(crate) server: &'p Upstream,
    pub(crate) routes: &'p Routes,
    pub(crate) model: Option<&'static crate::model::ModelDescriptor>,
    pub(crate) configs: &'p Map<String, Value>,
    pub(crate) project: Option<&'p Arc<Project>>,
}

/// What a generation gives a new session.
pub(crate) struct Start {
    pub(crate) server: Upstream,
    pub(crate) chain: Arc<Chain>,
    pub(crate) project: Option<Arc<Project>>,
}
