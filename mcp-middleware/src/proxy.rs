//! The entry point: a proxy that serves one client connection in front of one upstream.

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::error::ProxyError;
use crate::http::{HttpOptions, HttpServer, SessionFactory};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::chain::Chain;
use crate::model::{ModelDescriptor, ProxyModel};
use crate::project::Project;
use crate::routing::Routes;
use crate::session::{Ended, Event, Session, SessionOptions};
use crate::transport::lines::write_queued;
use crate::transport::queue::LineQueue;
use crate::transport::{LineReader, stdio};
use crate::upstream::Upstream;

/// A proxy between one MCP client and one upstream server.
///
/// ```no_run
/// use mcp_middleware::{Proxy, registry, upstream::StdioServer};
///
/// # async fn run() -> Result<(), mcp_middleware::ProxyError> {
/// let server = StdioServer::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]);
/// Proxy::new(server).serve_stdio().await
/// # }
/// ```
#[derive(Debug)]
pub struct Proxy {
    server: Upstream,
    model: Option<&'static ModelDescriptor>,
    configs: Map<String, Value>,
    project: Option<Arc<Project>>,
    options: SessionOptions,
    routes: Routes,
}

impl Proxy {
    /// A transparent proxy in front of `server`: a [`StdioServer`](crate::upstream::StdioServer)
    /// or a [`ServerSet`](crate::upstream::ServerSet).
    pub fn new(server: impl Into<Upstream>) -> Self {
        Self {
            server: server.into(),
            model: None,
            configs: Map::new(),
            project: None,
            options: SessionOptions::default(),
            routes: Routes::default(),
        }
    }

    /// Runs the proxy model `M` (a `#[proxy_model]` module's `Model`) on the messages.
    ///
    /// A proxy runs one model: a second call replaces the first. To run several, write a
    /// model that composes them (`#[proxy_model(extends = [gate, paginate])]`).
    pub fn model<M: ProxyModel>(self) -> Self {
        self.model_descriptor(M::DESCRIPTOR)
    }

    /// Runs a model found at run time (say by [`registry::find`](crate::registry::find)).
    pub fn model_descriptor(mut self, model: &'static ModelDescriptor) -> Self {
        self.model = Some(model);
        self
    }

    /// Sets the `Config` of the model called `model` in the chain, as JSON. It is checked when
    /// the proxy starts: a value the model refuses is an error naming the model and the field.
    pub fn config(mut self, model: impl Into<String>, config: Value) -> Self {
        self.configs.insert(model.into(), config);
        self
    }

    /// Gives the models a project (its prompts and servers), for [`Context::project`](crate::Context::project).
    pub fn project(mut self, mut project: Project) -> Self {
        if let Upstream::Set(set) = &self.server {
            project.separator = Some(set.namespace_separator().to_owned());
        }
        self.project = Some(Arc::new(project));
        self
    }

    /// Gives `ctx.llm()` an OpenAI-compatible endpoint for clients that cannot sample,
    /// replacing the project's (a proxy without a project gets an unnamed one).
    ///
    /// ```
    /// use mcp_middleware::{Proxy, llm::LlmEndpoint, upstream::StdioServer};
    ///
    /// let proxy = Proxy::new(StdioServer::new("my-server"))
    ///     .llm(LlmEndpoint::new("http://127.0.0.1:11434/v1", "llama3.2"));
    /// # let _ = proxy;
    /// ```
    pub fn llm(mut self, endpoint: crate::llm::LlmEndpoint) -> Self {
        let mut project = self
            .project
            .as_deref()
            .cloned()
            .unwrap_or_else(|| Project::new(""));
        project.llm = Some(endpoint);
        self.project = Some(Arc::new(project));
        self
    }

    /// Sets the routing paths: what is hidden from the client and what passes by the
    /// models; see [`routing`](crate::routing).
    ///
    /// ```
    /// use mcp_middleware::{Proxy, routing::Routes, upstream::StdioServer};
    ///
    /// let proxy = Proxy::new(StdioServer::new("my-server"))
    ///     .routes(Routes::new().hide("admin-*").pass_through("echo"));
    /// # let _ = proxy;
    /// ```
    pub fn routes(mut self, routes: Routes) -> Self {
        self.routes = routes;
        self
    }

    /// Composes the chain and validates every config and the registry, as `serve` does first.
    pub fn chain(&self) -> Result<Chain, ProxyError> {
        crate::registry::models()?;
        let chain = match self.model {
            Some(model) => Chain::new(model, &self.configs)?,
            None if self.configs.is_empty() => Chain::empty(),
            None => {
                return Err(ProxyError::Config {
                    model: self.configs.keys().next().cloned().unwrap_or_default(),
                    field: None,
                    message: "config was given but no model is set".to_owned(),
                });
            }
        };
        let chain = chain.with_routes(&self.routes, &self.server);
        // Live changes: the routes every session reads are the handle's (`crate::live`).
        Ok(match &self.options.live {
            Some(live) => chain.follow_routes(live.router_slot()),
            None => chain,
        })
    }

    /// What a live reload compares and installs (`crate::live`).
    pub(crate) fn live_parts(&self) -> crate::live::Parts<'_> {
        crate::live::Parts {
            server: &self.server,
            routes: &self.routes,
            model: self.model,
            configs: &self.configs,
            project: self.project.as_ref(),
        }
    }

    /// Replaces the session settings.
    pub fn options(mut self, options: SessionOptions) -> Self {
        self.options = options;
        self
    }

    /// Runs the proxy on the process's stdin and stdout until the client closes stdin or the
    /// process gets SIGTERM, SIGINT or SIGHUP, on a runtime of its own: what a binary's `main`
    /// calls. The upstream child is stopped either way.
    ///
    /// One thread runs the reader, the session loop and the writer, so a message never waits
    /// for another thread to wake (measured: about half the latency of two worker threads on a
    /// 2-core machine).
    ///
    /// ```no_run
    /// use mcp_middleware::{Proxy, upstream::StdioServer};
    ///
    /// fn main() -> Result<(), mcp_middleware::ProxyError> {
    ///     Proxy::new(StdioServer::new("my-server")).run_stdio()
    /// }
    /// ```
    pub fn run_stdio(self) -> Result<(), ProxyError> {
        crate::heap::prepare();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|cause| ProxyError::Downstream {
                what: "the async runtime could not start",
                cause,
            })?;
        runtime.block_on(async {
            tokio::select! {
                served = self.serve_stdio() => served,
                signal = terminated() => {
                    // Dropping the session kills the upstream child: it is never orphaned.
                    tracing::info!("{}; stopping", signal?);
                    Ok(())
                }
            }
        })
    }

    /// Serves the client on the process's stdin and stdout until the client closes stdin.
    pub async fn serve_stdio(self) -> Result<(), ProxyError> {
        let (input, output) = stdio::stdio().map_err(|cause| ProxyError::Downstream {
            what: "stdio could not be opened",
            cause,
        })?;
        self.serve(input, output).await
    }

    /// Serves one client that speaks newline-delimited JSON-RPC on `input` and `output`, until
    /// `input` ends. Starts the upstream first; fails if it cannot be started.
    pub async fn serve<R, W>(self, input: R, output: W) -> Result<(), ProxyError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let chain = Arc::new(self.chain()?);
        if let Some(model) = self.model {
            tracing::info!(model = model.name, layers = ?chain.layer_names(), server = %self.server, "proxy starting");
        }
        let (events_tx, events) = mpsc::channel(256);
        let (to_client, client_queue) = LineQueue::new(self.options.client_queue_bytes);
        // The stdio front writes answers cut through as they arrive.
        let to_client = to_client.taking_tails();
        let session = Session::start(
            self.server,
            self.options.clone(),
            to_client,
            chain,
            self.project,
            crate::auth::Identity::local_user(),
        )?;
        let writer = tokio::spawn(write_queued(output, client_queue));
        let max = self.options.max_message_bytes;
        let grace = self.options.shutdown_grace;
        let reader = tokio::spawn(async move {
            let mut lines = LineReader::new(input, max);
            loop {
                match lines.next_line().await {
                    Ok(Some(frame)) => {
                        if events_tx.send(Event::Client(frame)).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::warn!(%err, "reading from the client failed");
                        break;
                    }
                }
            }
            // Not `ClientClosed`: the client may still read the answers to what it asked.
            let _ = events_tx.send(Event::InputEnded).await;
        });
        let ended = session.run(events).await;
        reader.abort();
        let mut writer = writer;
        if let Ended::ClientNotReading(reason) = ended {
            // The writer is stuck on a client that does not read: it is not waited for.
            writer.abort();
            return Err(ProxyError::Downstream {
                what: "client stopped reading",
                cause: std::io::Error::other(reason),
            });
        }
        // What is still queued goes out, unless the client has stopped reading: a client that
        // closed its input and never reads its output must not keep the proxy alive.
        match tokio::time::timeout(grace, &mut writer).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(cause))) if cause.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Ok(Ok(Err(cause))) => Err(ProxyError::Downstream {
                what: "writing to the client failed",
                cause,
            }),
            Ok(Err(_)) => Ok(()),
            Err(_) => {
                writer.abort();
                tracing::warn!(
                    "the client did not read the last messages within {} s of closing its \
                     input; they were dropped",
                    grace.as_secs()
                );
                Ok(())
            }
        }
    }
}

impl Proxy {
    /// Serves MCP over streamable HTTP at `options.path` (default `/mcp`) on
    /// `options.listen`, in tasks of the current runtime; returns once listening. Every HTTP
    /// session runs its own upstream, started when the session starts; see [`crate::http`].
    ///
    /// ```no_run
    /// use mcp_middleware::{Proxy, http::HttpOptions, upstream::StdioServer};
    ///
    /// # async fn run() -> Result<(), mcp_middleware::ProxyError> {
    /// let options = HttpOptions::default().listen("127.0.0.1:0".parse().unwrap());
    /// let server = Proxy::new(StdioServer::new("my-server")).serve_http(options).await?;
    /// eprintln!("listening on {}", server.url());
    /// server.shutdown_on(async { let _ = tokio::signal::ctrl_c().await; }).await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn serve_http(self, options: HttpOptions) -> Result<HttpServer, ProxyError> {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|cause| ProxyError::Listen {
                addr: options.listen,
                cause,
            })?;
        self.serve_http_on(listener, options)
    }

    /// Serves MCP over streamable HTTP on a listener already bound (`options.listen` is not
    /// used). Must be called inside a tokio runtime.
    pub fn serve_http_on(
        self,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
    ) -> Result<HttpServer, ProxyError> {
        let chain = Arc::new(self.chain()?);
        if options.shared_store.is_some()
            && let Some(model) = crate::shared_store::sync::unstorable_models(&chain).first()
        {
            return Err(ProxyError::StateNotStorable {
                model: (*model).to_owned(),
            });
        }
        let addr = listener.local_addr().ok();
        let factory = SessionFactory {
            server: self.server,
            options: self.options,
            chain,
            project: self.project,
        };
        crate::http::start(listener, factory, options).map_err(|cause| ProxyError::Listen {
            addr: addr.unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            cause,
        })
    }

    /// Serves MCP over streamable HTTP until the process gets SIGTERM, SIGINT or SIGHUP, then
    /// shuts down gracefully ([`HttpServer::shutdown`]), on a runtime of its own: what a
    /// binary's `main` calls. Logs the endpoint's URL (`tracing`, info) once listening.
    ///
    /// ```no_run
    /// use mcp_middleware::{Proxy, http::HttpOptions, upstream::StdioServer};
    ///
    /// fn main() -> Result<(), mcp_middleware::ProxyError> {
    ///     Proxy::new(StdioServer::new("my-server")).run_http(HttpOptions::default())
    /// }
    /// ```
    pub fn run_http(self, options: HttpOptions) -> Result<(), ProxyError> {
        crate::heap::prepare();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|cause| ProxyError::Downstream {
                what: "the async runtime could not start",
                cause,
            })?;
        runtime.block_on(async {
            let server = self.serve_http(options).await?;
            tracing::info!(url = server.url(), "serving MCP over streamable HTTP");
            let mut failed = None;
            server
                .shutdown_on(async {
                    match terminated().await {
                        Ok(name) => tracing::info!("{name}; stopping"),
                        Err(err) => failed = Some(err),
                    }
                })
                .await;
            failed.map_or(Ok(()), Err)
        })
    }
}

/// Resolves when the process gets SIGTERM, SIGINT or SIGHUP, naming the signal: what
/// [`Proxy::run_stdio`] and [`Proxy::run_http`] stop on, for a binary that drives an
/// [`HttpServer`] itself.
///
/// ```no_run
/// use mcp_middleware::{Proxy, http::HttpOptions, proxy::stop_signal, upstream::StdioServer};
///
/// # async fn run() -> Result<(), mcp_middleware::ProxyError> {
/// let server = Proxy::new(StdioServer::new("my-server")).serve_http(HttpOptions::default()).await?;
/// eprintln!("listening on {}", server.url());
/// server.shutdown_on(async { let _ = stop_signal().await; }).await;
/// # Ok(())
/// # }
/// ```
pub async fn stop_signal() -> Result<&'static str, ProxyError> {
    terminated().await
}

/// Resolves when the process is asked to stop (SIGTERM, SIGINT, SIGHUP), naming the signal.
async fn terminated() -> Result<&'static str, ProxyError> {
    use tokio::signal::unix::{SignalKind, signal};
    let watch = |kind| {
        signal(kind).map_err(|cause| ProxyError::Downstream {
            what: "signals could not be watched",
            cause,
        })
    };
    let (mut term, mut int, mut hup) = (
        watch(SignalKind::terminate())?,
        watch(SignalKind::interrupt())?,
        watch(SignalKind::hangup())?,
    );
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    })
}

// Here rather than in `crate::live`: a reload builds from a `Proxy`, which sits above the live
// handle it is given in its session options.
impl crate::live::Live {
    /// Makes `proxy`'s configuration the running one (see the [module docs](self) for the
    /// order of events): validated first, refused whole with its error when it does not
    /// validate. A configuration equal to the running one changes nothing. Call it outside an
    /// async task or inside one alike: it does not block on sessions (each restarts its own
    /// upstream in its own task).
    pub fn reload(&self, proxy: &Proxy) -> Result<crate::live::Reloaded, ProxyError> {
        self.install(proxy.live_parts(), || proxy.chain())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::Proxy;
    use crate::live::{Live, next};
    use crate::routing::Routes;
    use crate::upstream::{StdioServer, Upstream};

    fn following(proxy: Proxy, live: &Live) -> Proxy {
        proxy.options(crate::SessionOptions {
            live: Some(live.clone()),
            ..Default::default()
        })
    }

    #[test]
    fn a_reload_reports_what_changed_and_an_equal_one_changes_nothing() {
        let live = Live::new();
        let first = live
            .reload(&following(Proxy::new(StdioServer::new("a")), &live))
            .expect("the first configuration");
        assert!(first.first && first.generation == 1);
        let same = live
            .reload(&following(Proxy::new(StdioServer::new("a")), &live))
            .expect("the same configuration");
        assert!(same.is_unchanged() && same.generation == 1, "{same}");
        let hidden = live
            .reload(&following(
                Proxy::new(StdioServer::new("b")).routes(Routes::new().hide("x")),
                &live,
            ))
            .expect("servers and routes");
        assert!(hidden.servers_changed && hidden.routes_changed && !hidden.model_changed);
        assert_eq!(hidden.generation, 2);
        assert_eq!(hidden.to_string(), "generation 2: servers, routes changed");
        let routes = live.router_slot();
        assert!(
            routes.read().expect("slot").is_some(),
            "the routes are in the slot"
        );
    }

    #[test]
    fn a_proxy_that_does_not_validate_changes_nothing() {
        let live = Live::new();
        live.reload(&following(Proxy::new(StdioServer::new("a")), &live))
            .expect("the first configuration");
        let wrong = following(
            Proxy::new(StdioServer::new("b")).config("nobody", Value::Null),
            &live,
        );
        assert!(live.reload(&wrong).is_err());
        assert_eq!(live.generation(), 1);
        let current = live.current();
        assert_eq!(
            current.installed.as_ref().map(|i| i.server.to_string()),
            Some(StdioServer::new("a").to_string())
        );
    }

    #[tokio::test]
    async fn a_follower_hears_of_the_newest_generation_and_binds_it() {
        let live = Live::new();
        live.reload(&following(Proxy::new(StdioServer::new("a")), &live))
            .expect("the first configuration");
        let server: Upstream = StdioServer::new("a").into();
        let mut follower = Some(live.follow(&server));
        live.reload(&following(Proxy::new(StdioServer::new("b")), &live))
            .expect("b");
        live.reload(&following(Proxy::new(StdioServer::new("c")), &live))
            .expect("c");
        let reload = next(&mut follower).await;
        assert_eq!(reload.number, 3);
        assert_eq!(
            reload.server.map(|s| s.to_string()),
            Some(StdioServer::new("c").to_string())
        );
        assert!(reload.lists.tools && reload.lists.prompts && reload.lists.resources);
        // A session that started on a stale generation hears of the running one at once.
        let mut stale = Some(live.follow(&server));
        assert_eq!(next(&mut stale).await.number, 3);
    }
}
