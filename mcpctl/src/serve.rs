//! `mcpctl serve PROJECT` and `mcpctl serve --model M -- CMD ARGS...`: MCP over streamable HTTP
//! at `/mcp`, for the same proxy `mcpctl proxy` serves on stdio. Every HTTP session
//! gets its own upstream (the project's servers, or the command), as every stdio client does.
//!
//! Identity and TLS: `--tokens`, `--jwt-secret-file` and `--jwt-key` make every
//! request carry a bearer credential; `--tls-cert`/`--tls-key` serve HTTPS, and `--client-ca`
//! asks clients for certificates (required, unless a bearer credential is configured too).
//!
//! Quotas: `--max-sessions` for the whole proxy, `--max-sessions-per-principal` for
//! each principal (each client address when no one authenticates), `--max-connections`; a
//! request past one is answered `503` with `Retry-After`, naming the flag.
//!
//! Replicas: `--store redis://HOST:PORT[/DB]` keeps sessions, model state and paged
//! documents in Redis under the project's name, so every replica started with the same store
//! and project serves every session (README, "Running several replicas"), and shares the
//! project's configuration: a change applied through one replica reaches the others
//! (`crate::live::shared`; README, "Sharing configuration between replicas").

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use mcp_middleware::auth::{Auth, IssuerKeys, JwtKey, JwtVerifier, TokenList};
use mcp_middleware::http::{ClientCertificates, HttpOptions, ProtectedResource, TlsOptions};
use mcp_middleware::proxy::stop_signal;
use mcpctl::store::auth::ProjectAuth;
use mcpctl::store::{ProjectSpec, Store};

use crate::proxy::ProxyArgs;

/// `serve`'s arguments: those of `proxy`, and where and how to listen.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) proxy: ProxyArgs,
    /// The address to listen on. Default: the project's `listen`, else 127.0.0.1:8080
    /// (loopback only).
    #[arg(long, value_name = "ADDR", env = "MCPCTL_LISTEN")]
    pub(crate) listen: Option<SocketAddr>,
    /// A `Host` to accept besides the loopback names (repeatable; `*` for any), for a proxy
    /// reached under another name. Hosts not listed are refused (DNS-rebinding protection).
    #[arg(
        long = "allow-host",
        value_name = "HOST",
        env = "MCPCTL_ALLOW_HOST",
        value_delimiter = ','
    )]
    pub(crate) allow_hosts: Vec<String>,
    /// A browser `Origin` to accept besides loopback origins (repeatable; `*` for any).
    #[arg(
        long = "allow-origin",
        value_name = "ORIGIN",
        env = "MCPCTL_ALLOW_ORIGIN",
        value_delimiter = ','
    )]
    pub(crate) allow_origins: Vec<String>,
    /// How many sessions may be open at once (each runs its own upstream).
    #[arg(
        long,
        default_value_t = 256,
        value_name = "N",
        env = "MCPCTL_MAX_SESSIONS"
    )]
    pub(crate) max_sessions: usize,
    /// How many of those one principal may hold; without authentication, one client address
    /// (IPv6: one /64). Default: an eighth of --max-sessions (32 of 256).
    #[arg(long, value_name = "N", env = "MCPCTL_MAX_SESSIONS_PER_PRINCIPAL")]
    pub(crate) max_sessions_per_principal: Option<usize>,
    /// How many TCP/TLS connections may be open at once (each SSE stream holds one); one more
    /// is answered 503 and closed.
    #[arg(
        long,
        default_value_t = 1024,
        value_name = "N",
        env = "MCPCTL_MAX_CONNECTIONS"
    )]
    pub(crate) max_connections: usize,
    /// How many of those one client address may hold (IPv6: one /64); one more from that
    /// address is answered 503 and closed while other addresses are served. Default: a quarter
    /// of --max-connections or 64, whichever is smaller.
    #[arg(long, value_name = "N", env = "MCPCTL_MAX_CONNECTIONS_PER_ADDRESS")]
    pub(crate) max_connections_per_address: Option<usize>,
    /// Seconds a session may stay idle before it is ended (and its upstream stopped).
    #[arg(
        long,
        default_value_t = 600,
        value_name = "SECS",
        env = "MCPCTL_IDLE_TIMEOUT"
    )]
    pub(crate) idle_timeout: u64,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES", env = "MCPCTL_MAX_BODY_BYTES")]
    pub(crate) max_body_bytes: usize,
    /// How many bytes of SSE events each session keeps for a client that resumes a broken
    /// stream (`Last-Event-ID`); the oldest go first. An answer longer than this is not kept:
    /// a client that lost it and resumes gets an error for its request instead (0 keeps
    /// nothing).
    #[arg(long, default_value_t = HttpOptions::default().event_store_bytes, value_name = "BYTES", env = "MCPCTL_EVENT_STORE_BYTES")]
    pub(crate) event_store_bytes: usize,
    /// How many threads run sessions (the async runtime's workers). Default: one per CPU core
    /// (or `TOKIO_WORKER_THREADS`). One thread hands each message from task to task without
    /// waking another thread: on 2 cores shared with the upstreams, 36-41% less CPU per call
    /// for `default` and HTTP upstreams, at the same throughput at 32 sessions. More
    /// threads are for cores the proxy has to itself.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), env = "MCPCTL_THREADS")]
    pub(crate) threads: Option<u16>,
    #[command(flatten)]
    pub(crate) store: Box<StoreArgs>,
    #[command(flatten)]
    pub(crate) identity: Box<IdentityArgs>,
    #[command(flatten)]
    pub(crate) admin: Box<AdminArgs>,
}

/// The shared store replicas share sessions through (off unless asked for).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Replicas")]
pub(crate) struct StoreArgs {
    /// Keep sessions in this shared store (`redis://HOST:PORT[/DB]`, `rediss://` for TLS;
    /// Redis or Valkey), so any replica serving the same project with the same store serves
    /// any session. Needs --state-key-file: every record in the store is authenticated with
    /// it. Default: sessions live in this process.
    #[arg(long, value_name = "URL", env = "MCPCTL_STORE", hide_env_values = true)]
    pub(crate) store: Option<String>,
    /// With a `rediss://` --store: check the server's certificate against the authorities in
    /// this PEM file instead of the system's roots.
    #[arg(
        long,
        value_name = "FILE",
        requires = "store",
        env = "MCPCTL_STORE_CA_FILE"
    )]
    pub(crate) store_ca_file: Option<PathBuf>,
    /// With a `rediss://` --store: present this client certificate chain (PEM) to the server.
    #[arg(long, value_name = "FILE", requires_all = ["store", "store_key_file"], env = "MCPCTL_STORE_CERT_FILE")]
    pub(crate) store_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --store-cert-file.
    #[arg(
        long,
        value_name = "FILE",
        requires = "store_cert_file",
        env = "MCPCTL_STORE_KEY_FILE"
    )]
    pub(crate) store_key_file: Option<PathBuf>,
    /// With --store: seconds this replica keeps its copy of a session (and that session's
    /// upstream) without a request; the session lives on in the store for --idle-timeout and
    /// any replica restores it. Default: --idle-timeout.
    #[arg(
        long,
        value_name = "SECS",
        requires = "store",
        env = "MCPCTL_REPLICA_IDLE_TIMEOUT"
    )]
    pub(crate) replica_idle_timeout: Option<u64>,
}

/// The admin listener (off unless asked for).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Admin listener")]
pub(crate) struct AdminArgs {
    /// Serve the admin API, web UI (/ui/) and /metrics on this address (loopback unless
    /// --admin-listen-public). Needs --admin-tokens.
    #[arg(
        long,
        value_name = "ADDR",
        requires = "admin_tokens",
        env = "MCPCTL_ADMIN_LISTEN"
    )]
    pub(crate) admin_listen: Option<SocketAddr>,
    /// The admin tokens, in the --tokens format (`SUBJECT TOKEN` or `SUBJECT sha256:HEX` per
    /// line), read again whenever the file changes.
    #[arg(
        long,
        value_name = "FILE",
        requires = "admin_listen",
        env = "MCPCTL_ADMIN_TOKENS"
    )]
    pub(crate) admin_tokens: Option<PathBuf>,
    /// Let --admin-listen be a non-loopback address. The admin API can end sessions, call
    /// tools and rewrite the store, and it speaks plain HTTP: put it on another host only
    /// behind a TLS-terminating proxy or a private network.
    #[arg(long, requires = "admin_listen", env = "MCPCTL_ADMIN_LISTEN_PUBLIC")]
    pub(crate) admin_listen_public: bool,
}

/// How clients are identified, and HTTPS.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Identity and TLS")]
pub(crate) struct IdentityArgs {
    /// Serve HTTPS with this certificate chain (PEM, the server's own certificate first).
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        env = "MCPCTL_TLS_CERT"
    )]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, RSA or EC).
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_cert",
        env = "MCPCTL_TLS_KEY"
    )]
    pub(crate) tls_key: Option<PathBuf>,
    /// Ask clients for TLS certificates issued by this CA (PEM) and identify them by the
    /// certificate's subject (mTLS). Required, unless --tokens or a JWT key is also given.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_cert",
        env = "MCPCTL_CLIENT_CA"
    )]
    pub(crate) client_ca: Option<PathBuf>,
    /// Accept the bearer tokens in this file: one `SUBJECT TOKEN` (or `SUBJECT sha256:HEX`) per
    /// line. Read again whenever it changes: removing a line revokes that token at once.
    #[arg(long, value_name = "FILE", env = "MCPCTL_TOKENS")]
    pub(crate) tokens: Option<PathBuf>,
    /// Accept JWTs signed with HS256/384/512 with the secret in this file (at least 32 bytes;
    /// a trailing newline is not part of it).
    #[arg(long, value_name = "FILE", env = "MCPCTL_JWT_SECRET_FILE")]
    pub(crate) jwt_secret_file: Option<PathBuf>,
    /// Accept JWTs signed by the key in this file: a PEM public key (RSA, EC P-256/P-384,
    /// Ed25519) or a JWK set (repeatable).
    #[arg(long = "jwt-key", value_name = "FILE", env = "MCPCTL_JWT_KEY")]
    pub(crate) jwt_keys: Vec<PathBuf>,
    /// Require JWTs to carry this issuer (`iss`).
    #[arg(long, value_name = "ISSUER", env = "MCPCTL_JWT_ISSUER")]
    pub(crate) jwt_issuer: Option<String>,
    /// Require JWTs to carry this audience (`aud`).
    #[arg(long, value_name = "AUDIENCE", env = "MCPCTL_JWT_AUDIENCE")]
    pub(crate) jwt_audience: Option<String>,
    /// The JWT claim that names the client. Default: the project's `auth.jwt.subjectClaim`,
    /// else `sub`.
    #[arg(long, value_name = "CLAIM", env = "MCPCTL_JWT_SUBJECT_CLAIM")]
    pub(crate) jwt_subject_claim: Option<String>,
    /// Seconds of clock skew allowed on JWTs' `exp` and `nbf`. Default: the project's
    /// `auth.jwt.leeway`, else 60.
    #[arg(long, value_name = "SECS", env = "MCPCTL_JWT_LEEWAY")]
    pub(crate) jwt_leeway: Option<u64>,
}

impl IdentityArgs {
    /// The credentials and TLS settings the flags and the project's `auth` ask for (every
    /// file read and checked now; a flag overrides the project's setting it stands for), and
    /// the issuer whose keys are still to be fetched.
    fn apply(
        &self,
        mut options: HttpOptions,
        project: Option<&ProjectAuth>,
    ) -> anyhow::Result<(HttpOptions, Option<IssuerKeys>)> {
        let mut auth = Auth::new();
        let tokens = self
            .tokens
            .clone()
            .or_else(|| project.and_then(|p| p.tokens.as_ref().map(PathBuf::from)));
        if let Some(path) = &tokens {
            auth = auth.tokens(TokenList::from_file(path)?);
        }
        let mut keys = Vec::new();
        if let Some(path) = &self.jwt_secret_file {
            keys.push(hmac_key(path)?);
        }
        for path in &self.jwt_keys {
            keys.extend(JwtKey::from_file(path)?);
        }
        let project_jwt = project.and_then(|p| p.jwt.as_ref());
        let jwt_flags = self.jwt_issuer.is_some()
            || self.jwt_audience.is_some()
            || self.jwt_subject_claim.is_some()
            || self.jwt_leeway.is_some();
        if keys.is_empty() && jwt_flags && project_jwt.is_none() {
            bail!(
                "--jwt-issuer, --jwt-audience, --jwt-subject-claim and --jwt-leeway need --jwt-secret-file or --jwt-key (or `auth.jwt` in the project)"
            );
        }
        let mut pending = None;
        let verifier = if !keys.is_empty() {
            // The flags' keys replace the project's JWT settings whole: today's behaviour.
            let mut verifier = JwtVerifier::with_keys(keys);
            if let Some(issuer) = &self.jwt_issuer {
                verifier = verifier.issuer(issuer);
            }
            if let Some(audience) = &self.jwt_audience {
                verifier = verifier.audience(audience);
            }
            Some(verifier)
        } else if let Some(jwt) = project_jwt {
            let issuer = self.jwt_issuer.as_deref().unwrap_or(&jwt.issuer);
            let mut verifier = if let Some(path) = &jwt.secret_file {
                JwtVerifier::new(hmac_key(Path::new(path))?).issuer(issuer)
            } else if let Some(path) = &jwt.key_file {
                JwtVerifier::with_keys(JwtKey::from_file(path)?).issuer(issuer)
            } else {
                let keys = match &jwt.jwks_uri {
                    Some(uri) => IssuerKeys::with_jwks_uri(issuer, uri.as_str())?,
                    None => IssuerKeys::new(issuer)?,
                };
                pending = Some(keys.clone());
                JwtVerifier::from_issuer(keys)
            };
            // Without an audience the resource is the audience (set once the front is bound).
            if let Some(audience) = self.jwt_audience.as_ref().or(jwt.audience.as_ref()) {
                verifier = verifier.audience(audience);
            }
            if let Some(claim) = &jwt.subject_claim {
                verifier = verifier.subject_claim(claim);
            }
            if let Some(leeway) = jwt.leeway {
                verifier = verifier.leeway(Duration::from_secs(leeway));
            }
            Some(verifier)
        } else {
            None
        };
        if let Some(mut verifier) = verifier {
            if let Some(claim) = &self.jwt_subject_claim {
                verifier = verifier.subject_claim(claim);
            }
            if let Some(leeway) = self.jwt_leeway {
                verifier = verifier.leeway(Duration::from_secs(leeway));
            }
            auth = auth.jwt(verifier);
        }
        if let Some(project) = project.filter(|p| p.publishes_resource()) {
            let mut resource = ProtectedResource::new().audience_is_resource(
                project_jwt.is_some() && self.jwt_keys.is_empty() && self.jwt_secret_file.is_none(),
            );
            if let Some(oauth) = &project.oauth {
                if let Some(id) = &oauth.resource {
                    resource = resource.resource(id);
                }
                for scope in &oauth.scopes {
                    resource = resource.scope(scope);
                }
            }
            for server in project.authorization_servers() {
                resource = resource.authorization_server(server);
            }
            options = options.protected_resource(resource);
        }
        let client_ca = self
            .client_ca
            .clone()
            .or_else(|| project.and_then(|p| p.mtls.as_ref().map(|m| PathBuf::from(&m.client_ca))));
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            let mut tls = TlsOptions::from_pem_files(cert, key)?;
            if let Some(ca) = &client_ca {
                let mode = if auth.is_required() {
                    ClientCertificates::Optional
                } else {
                    ClientCertificates::Required
                };
                tls = tls.client_certificates_file(ca, mode)?;
            }
            options = options.tls(tls);
        } else if client_ca.is_some() {
            bail!(
                "the project's `auth.mtls` needs --tls-cert and --tls-key (client certificates come over TLS)"
            );
        }
        if !auth.is_required() && client_ca.is_none() && !options.listen.ip().is_loopback() {
            tracing::warn!(
                listen = %options.listen,
                "serving without authentication on a non-loopback address: anyone who reaches \
                 it can use the upstream (see --tokens, --jwt-key, --client-ca)"
            );
        }
        Ok((options.auth(auth), pending))
    }
}

/// An HMAC secret from a file, without the trailing newline an editor or `echo` adds.
fn hmac_key(path: &Path) -> anyhow::Result<JwtKey> {
    let mut secret = std::fs::read(path)
        .with_context(|| format!("cannot read the JWT secret `{}`", path.display()))?;
    if secret.ends_with(b"\n") {
        secret.pop();
        if secret.ends_with(b"\r") {
            secret.pop();
        }
    }
    JwtKey::hmac(secret).with_context(|| format!("the JWT secret `{}`", path.display()))
}

/// Serves until SIGTERM, SIGINT or SIGHUP, then shuts down gracefully.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let stored = match &args.proxy.project {
        Some(project) => Some(Store::from_env()?.get::<ProjectSpec>(project)?),
        None => None,
    };
    let listen = match (
        args.listen,
        stored.as_ref().and_then(|p| p.spec.listen.as_ref()),
    ) {
        (Some(listen), _) => listen,
        (None, Some(listen)) => listen.parse().with_context(|| {
            format!(
                "project `{}`: `listen` is not an address: `{listen}`",
                stored.as_ref().map(|p| p.name.as_str()).unwrap_or_default()
            )
        })?,
        (None, None) => HttpOptions::default().listen,
    };
    let project_auth = stored.as_ref().and_then(|p| p.spec.auth.as_deref());
    for (flag, value) in [
        ("--max-sessions", Some(args.max_sessions)),
        (
            "--max-sessions-per-principal",
            args.max_sessions_per_principal,
        ),
        ("--max-connections", Some(args.max_connections)),
        (
            "--max-connections-per-address",
            args.max_connections_per_address,
        ),
    ] {
        if value == Some(0) {
            bail!("{flag} must be at least 1 (0 would refuse every client)");
        }
    }
    let mut options = HttpOptions::default()
        .listen(listen)
        .max_sessions(args.max_sessions)
        .max_connections(args.max_connections)
        .idle_timeout(Duration::from_secs(args.idle_timeout))
        .max_body_bytes(args.max_body_bytes);
    let events = options.event_store_events;
    options = options.event_store(events, args.event_store_bytes);
    if let Some(secs) = args.store.replica_idle_timeout {
        options.replica_idle_timeout = Some(Duration::from_secs(secs));
    }
    if let Some(quota) = args.max_connections_per_address {
        options = options.max_connections_per_address(quota);
    }
    if let Some(quota) = args.max_sessions_per_principal {
        options = options.max_sessions_per_principal(quota);
    }
    for host in args.allow_hosts {
        options = options.allow_host(host);
    }
    for origin in args.allow_origins {
        options = options.allow_origin(origin);
    }
    let (mut options, issuer_keys) = args.identity.apply(options, project_auth)?;
    let admin = crate::admin::setup::prepare(&args.admin, &args.proxy, stored.as_ref())?;
    // Dropped after the runtime: sessions have ended and their spans are flushed then.
    let traces = crate::otel::Traces::from_env(crate::otel::Downstream::Http)?;
    let taps = [traces.tap(), admin.as_ref().and_then(|admin| admin.tap())];
    let tap = mcp_middleware::request_tap::fan_out(taps.into_iter().flatten().collect());
    let namespace = args
        .proxy
        .project
        .clone()
        .unwrap_or_else(|| "adhoc".to_owned());
    let store_url = args.store.store.as_deref().map(store_url).transpose()?;
    // Derived once, here: every replica's records are authenticated with it.
    let store_trust = match &store_url {
        Some(_) => Some(store_trust(
            &args.store,
            args.proxy.state_key_file.as_deref(),
        )?),
        None => None,
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.threads {
        runtime.worker_threads(threads.into());
    }
    let runtime = runtime
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // With a shared store, replicas of a project share its configuration
    // (`crate::live::shared`): the newest generation is in this replica's store before the
    // proxy is built from it.
    let shared_config = match (&store_url, &store_trust, &args.proxy.project) {
        (Some(url), Some(trust), Some(project)) => {
            Some(runtime.block_on(take_shared_config(url, project, &Store::from_env()?, trust))?)
        }
        _ => None,
    };
    // A project's proxy follows changes to the store (`crate::live`).
    let proxy_args = std::sync::Arc::new(args.proxy);
    let (proxy, reloader) = crate::live::Reloader::start(proxy_args.clone(), tap)?;
    let probe_store = stored.as_ref().map(|p| (Store::from_env(), p.name.clone()));
    options = options.readiness(readiness(
        proxy_args.clone(),
        reloader.as_ref().map(|r| r.live().clone()),
        probe_store.and_then(|(store, name)| Some((store.ok()?, name))),
    ));
    let _watch = reloader.clone().and_then(crate::live::watch::start);
    let sharing = shared_config.zip(reloader.clone());
    let admin = admin.map(|admin| admin.with_factory(proxy_args, reloader));
    runtime.block_on(async {
        if let Some((config, reloader)) = sharing {
            share_config(config, reloader);
        }
        if let Some(keys) = &issuer_keys {
            // Fail at start, not at the first client, when the issuer cannot be read.
            keys.load().await?;
        }
        if let (Some(url), Some(trust)) = (&store_url, &store_trust) {
            options = options.shared_store(shared_store(url, &namespace, trust).await?);
        }
        // The admin listener accepts the hosts and origins the MCP front does.
        let guard = mcp_middleware::http::Guard::new(&options);
        let server = proxy.serve_http(options).await?;
        // The one line a person (or a test harness) starting it needs: the URL, with the port
        // when `--listen` said 0.
        crate::cli::say("INFO", &format!("listening on {}", server.url()));
        let admin = match admin {
            Some(admin) => Some(admin.start(server.sessions(), guard).await?),
            None => None,
        };
        let mut stopped = Ok(());
        server
            .shutdown_on(async {
                match stop_signal().await {
                    Ok(signal) => tracing::info!("{signal}; stopping"),
                    Err(err) => stopped = Err(err),
                }
            })
            .await;
        if let Some(admin) = admin {
            admin.shutdown().await;
        }
        Ok(stopped?)
    })
}

/// What `/readyz` checks beyond the shared store: a session of its own through the same proxy
/// (started at the first probe and kept, as the admin session is) answers `ping`, so the
/// upstreams start and answer; and, for a project with several servers, none of them is
/// recorded as down. The pings are requests like any other: observers (`audit`) see them, as
/// the local user.
fn readiness(
    args: std::sync::Arc<ProxyArgs>,
    live: Option<mcp_middleware::live::Live>,
    project: Option<(Store, String)>,
) -> mcp_middleware::http::Readiness {
    use mcp_middleware::http::NotReady;
    use mcp_middleware::jsonrpc::{UPSTREAM_BACKLOG, UPSTREAM_UNAVAILABLE};
    const GENERIC: &str = "an upstream is not running";
    let factory: crate::admin::view::ProxyFactory =
        std::sync::Arc::new(move || crate::proxy::build_following(&args, None, live.clone()));
    let probe = std::sync::Arc::new(crate::admin::view::View::new(factory));
    let project = std::sync::Arc::new(project);
    mcp_middleware::http::Readiness::new(move || {
        let (probe, project) = (probe.clone(), project.clone());
        async move {
            use crate::admin::view::ViewError;
            match probe.request("ping", serde_json::json!({})).await {
                Ok(_) => {}
                // The proxy's own errors for an upstream that is not there: -32001
                // unavailable, -32002 timeout, -32003 backlog. An upstream that answers, even
                // "method not found", is running.
                Err(ViewError::Rpc { code, message })
                    if (UPSTREAM_BACKLOG..=UPSTREAM_UNAVAILABLE).contains(&code) =>
                {
                    return Err(NotReady::new(message, GENERIC));
                }
                Err(ViewError::Rpc { .. }) => {}
                Err(ViewError::Start(why)) => {
                    return Err(NotReady::new(
                        format!("the proxy cannot start: {why}"),
                        GENERIC,
                    ));
                }
                Err(ViewError::Gone(what)) => {
                    return Err(NotReady::new(
                        format!("the readiness session {what}"),
                        GENERIC,
                    ));
                }
            }
            let Some((store, name)) = project.as_ref() else {
                return Ok(());
            };
            match down_server(store, name) {
                Some((server, why)) => Err(NotReady::new(
                    format!("upstream `{server}` is not running: {why}"),
                    GENERIC,
                )),
                None => Ok(()),
            }
        }
    })
}

/// The first server the project's status file records as down, and why.
fn down_server(store: &Store, project: &str) -> Option<(String, String)> {
    let text = std::fs::read_to_string(crate::proxy::status_file(store, project)).ok()?;
    let states: Vec<serde_json::Value> = serde_json::from_str(&text).ok()?;
    states.iter().find_map(|state| {
        (state.get("state")?.as_str()? == "down").then(|| {
            let name = state.get("name").and_then(|n| n.as_str()).unwrap_or("?");
            let why = state
                .get("reason")
                .and_then(|r| r.as_str())
                .unwrap_or("down");
            (name.to_owned(), why.to_owned())
        })
    })
}

/// `--store URL` checked (a `redis://`, `rediss://`, `valkey://` or `valkeys://` URL) and
/// spelled as the `redis` crate reads it.
fn store_url(url: &str) -> anyhow::Result<String> {
    let known = ["redis://", "rediss://", "valkey://", "valkeys://"];
    if !known.iter().any(|scheme| url.starts_with(scheme)) {
        bail!(
            "--store: `{}` is not a redis:// or rediss:// URL",
            mcp_middleware::shared_store::redact(url)
        );
    }
    Ok(url
        .replacen("valkeys://", "rediss://", 1)
        .replacen("valkey://", "redis://", 1))
}

/// How this replica trusts the store: the key derived from --state-key-file (required: a
/// store anyone could write to without it would configure every replica) and the TLS files.
fn store_trust(
    args: &StoreArgs,
    key_file: Option<&Path>,
) -> anyhow::Result<mcp_middleware::shared_store::StoreTrust> {
    use mcp_middleware::shared_store::{StoreKey, StoreTrust};
    let Some(key_file) = key_file else {
        bail!(
            "--store needs --state-key-file FILE: the replicas authenticate everything they \
             write to the store (configuration, sessions) with the secret in FILE (32 bytes or \
             more, the same file for every replica; e.g. `head -c 32 /dev/urandom > FILE`)"
        );
    };
    let key = StoreKey::from_file(key_file)
        .with_context(|| format!("--state-key-file {}", key_file.display()))?;
    let mut trust = StoreTrust::new(key);
    if let Some(ca) = &args.store_ca_file {
        trust = trust.ca_file(ca);
    }
    if let (Some(cert), Some(key)) = (&args.store_cert_file, &args.store_key_file) {
        trust = trust.client_identity(cert, key);
    }
    Ok(trust)
}

/// The shared store `--store URL` names, connected (it must answer now).
#[cfg(feature = "redis")]
async fn shared_store(
    url: &str,
    namespace: &str,
    trust: &mcp_middleware::shared_store::StoreTrust,
) -> anyhow::Result<mcp_middleware::shared_store::SharedStore> {
    mcp_middleware::shared_store::SharedStore::redis(url, namespace, trust)
        .await
        .context("--store")
}

/// The project's configuration shared with the other replicas, its newest generation taken
/// into `store` (`crate::live::shared`).
#[cfg(feature = "redis")]
async fn take_shared_config(
    url: &str,
    project: &str,
    store: &Store,
    trust: &mcp_middleware::shared_store::StoreTrust,
) -> anyhow::Result<mcp_middleware::shared_store::SharedConfig> {
    crate::live::shared::take_newest_at_start(url, project, store, trust).await
}

/// Without the `redis` feature there is no shared store to take a configuration from.
#[cfg(not(feature = "redis"))]
async fn take_shared_config(
    _url: &str,
    _project: &str,
    _store: &Store,
    _trust: &mcp_middleware::shared_store::StoreTrust,
) -> anyhow::Result<()> {
    bail!("--store needs an mcpctl built with the `redis` feature")
}

/// Keeps the configuration in step with the other replicas (a task of its own).
#[cfg(feature = "redis")]
fn share_config(
    config: mcp_middleware::shared_store::SharedConfig,
    reloader: std::sync::Arc<crate::live::Reloader>,
) {
    crate::live::shared::start(config, reloader);
}

#[cfg(not(feature = "redis"))]
fn share_config((): (), _reloader: std::sync::Arc<crate::live::Reloader>) {}

/// Without the `redis` feature there is no shared store to connect to.
#[cfg(not(feature = "redis"))]
async fn shared_store(
    _url: &str,
    _namespace: &str,
    _trust: &mcp_middleware::shared_store::StoreTrust,
) -> anyhow::Result<mcp_middleware::shared_store::SharedStore> {
    bail!("--store needs an mcpctl built with the `redis` feature")
}
