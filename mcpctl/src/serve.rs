//! `mcpctl serve PROJECT` and `mcpctl serve --model M -- CMD ARGS...`: MCP over streamable HTTP
//! at `/mcp` (SPEC T2), for the same proxy `mcpctl proxy` serves on stdio. Every HTTP session
//! gets its own upstream (the project's servers, or the command), as every stdio client does.
//!
//! Identity and TLS (SPEC T5): `--tokens`, `--jwt-secret-file` and `--jwt-key` make every
//! request carry a bearer credential; `--tls-cert`/`--tls-key` serve HTTPS, and `--client-ca`
//! asks clients for certificates (required, unless a bearer credential is configured too).
//!
//! Quotas (SPEC S3): `--max-sessions` for the whole proxy, `--max-sessions-per-principal` for
//! each principal (each client address when no one authenticates), `--max-connections`; a
//! request past one is answered `503` with `Retry-After`, naming the flag.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use mcp_middleware::auth::{Auth, JwtKey, JwtVerifier, TokenList};
use mcp_middleware::http::{ClientCertificates, HttpOptions, TlsOptions};
use mcp_middleware::proxy::stop_signal;
use mcpctl::store::{ProjectSpec, Store};

use crate::proxy::{ProxyArgs, build};

/// `serve`'s arguments: those of `proxy`, and where and how to listen.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) proxy: ProxyArgs,
    /// The address to listen on. Default: the project's `listen`, else 127.0.0.1:8080
    /// (loopback only).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<SocketAddr>,
    /// A `Host` to accept besides the loopback names (repeatable; `*` for any), for a proxy
    /// reached under another name. Hosts not listed are refused (DNS-rebinding protection).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub(crate) allow_hosts: Vec<String>,
    /// A browser `Origin` to accept besides loopback origins (repeatable; `*` for any).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub(crate) allow_origins: Vec<String>,
    /// How many sessions may be open at once (each runs its own upstream).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub(crate) max_sessions: usize,
    /// How many of those one principal may hold; without authentication, one client address
    /// (IPv6: one /64). Default: an eighth of --max-sessions (32 of 256).
    #[arg(long, value_name = "N")]
    pub(crate) max_sessions_per_principal: Option<usize>,
    /// How many TCP/TLS connections may be open at once (each SSE stream holds one); one more
    /// is answered 503 and closed.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub(crate) max_connections: usize,
    /// Seconds a session may stay idle before it is ended (and its upstream stopped).
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    pub(crate) idle_timeout: u64,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES")]
    pub(crate) max_body_bytes: usize,
    #[command(flatten)]
    pub(crate) identity: Box<IdentityArgs>,
}

/// How clients are identified, and HTTPS.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Identity and TLS")]
pub(crate) struct IdentityArgs {
    /// Serve HTTPS with this certificate chain (PEM, the server's own certificate first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, RSA or EC).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Ask clients for TLS certificates issued by this CA (PEM) and identify them by the
    /// certificate's subject (mTLS). Required, unless --tokens or a JWT key is also given.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) client_ca: Option<PathBuf>,
    /// Accept the bearer tokens in this file: one `SUBJECT TOKEN` (or `SUBJECT sha256:HEX`) per
    /// line. Read again whenever it changes: removing a line revokes that token at once.
    #[arg(long, value_name = "FILE")]
    pub(crate) tokens: Option<PathBuf>,
    /// Accept JWTs signed with HS256/384/512 with the secret in this file (at least 32 bytes;
    /// a trailing newline is not part of it).
    #[arg(long, value_name = "FILE")]
    pub(crate) jwt_secret_file: Option<PathBuf>,
    /// Accept JWTs signed by the key in this file: a PEM public key (RSA, EC P-256/P-384,
    /// Ed25519) or a JWK set (repeatable).
    #[arg(long = "jwt-key", value_name = "FILE")]
    pub(crate) jwt_keys: Vec<PathBuf>,
    /// Require JWTs to carry this issuer (`iss`).
    #[arg(long, value_name = "ISSUER")]
    pub(crate) jwt_issuer: Option<String>,
    /// Require JWTs to carry this audience (`aud`).
    #[arg(long, value_name = "AUDIENCE")]
    pub(crate) jwt_audience: Option<String>,
    /// The JWT claim that names the client.
    #[arg(long, default_value = "sub", value_name = "CLAIM")]
    pub(crate) jwt_subject_claim: String,
    /// Seconds of clock skew allowed on JWTs' `exp` and `nbf`.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub(crate) jwt_leeway: u64,
}

impl IdentityArgs {
    /// The credentials and TLS settings the flags ask for (every file read and checked now).
    fn apply(&self, mut options: HttpOptions) -> anyhow::Result<HttpOptions> {
        let mut auth = Auth::new();
        if let Some(path) = &self.tokens {
            auth = auth.tokens(TokenList::from_file(path)?);
        }
        let mut keys = Vec::new();
        if let Some(path) = &self.jwt_secret_file {
            keys.push(hmac_key(path)?);
        }
        for path in &self.jwt_keys {
            keys.extend(JwtKey::from_file(path)?);
        }
        let jwt_flags = self.jwt_issuer.is_some()
            || self.jwt_audience.is_some()
            || self.jwt_subject_claim != "sub";
        if keys.is_empty() && jwt_flags {
            bail!(
                "--jwt-issuer, --jwt-audience and --jwt-subject-claim need --jwt-secret-file or --jwt-key"
            );
        }
        if !keys.is_empty() {
            let mut verifier = JwtVerifier::with_keys(keys)
                .subject_claim(&self.jwt_subject_claim)
                .leeway(Duration::from_secs(self.jwt_leeway));
            if let Some(issuer) = &self.jwt_issuer {
                verifier = verifier.issuer(issuer);
            }
            if let Some(audience) = &self.jwt_audience {
                verifier = verifier.audience(audience);
            }
            auth = auth.jwt(verifier);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            let mut tls = TlsOptions::from_pem_files(cert, key)?;
            if let Some(ca) = &self.client_ca {
                let mode = if auth.is_required() {
                    ClientCertificates::Optional
                } else {
                    ClientCertificates::Required
                };
                tls = tls.client_certificates_file(ca, mode)?;
            }
            options = options.tls(tls);
        }
        if !auth.is_required() && self.client_ca.is_none() && !options.listen.ip().is_loopback() {
            tracing::warn!(
                listen = %options.listen,
                "serving without authentication on a non-loopback address: anyone who reaches \
                 it can use the upstream (see --tokens, --jwt-key, --client-ca)"
            );
        }
        Ok(options.auth(auth))
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
    let listen = match (args.listen, &args.proxy.project) {
        (Some(listen), _) => listen,
        (None, Some(project)) => {
            let stored = Store::from_env()?.get::<ProjectSpec>(project)?;
            match stored.spec.listen {
                Some(listen) => listen.parse().with_context(|| {
                    format!("project `{project}`: `listen` is not an address: `{listen}`")
                })?,
                None => HttpOptions::default().listen,
            }
        }
        (None, None) => HttpOptions::default().listen,
    };
    for (flag, value) in [
        ("--max-sessions", Some(args.max_sessions)),
        (
            "--max-sessions-per-principal",
            args.max_sessions_per_principal,
        ),
        ("--max-connections", Some(args.max_connections)),
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
    if let Some(quota) = args.max_sessions_per_principal {
        options = options.max_sessions_per_principal(quota);
    }
    for host in args.allow_hosts {
        options = options.allow_host(host);
    }
    for origin in args.allow_origins {
        options = options.allow_origin(origin);
    }
    let options = args.identity.apply(options)?;
    let proxy = build(&args.proxy)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let server = proxy.serve_http(options).await?;
        // The one line a person (or a test harness) starting it needs: the URL, with the port
        // when `--listen` said 0.
        eprintln!("listening on {}", server.url());
        let mut stopped = Ok(());
        server
            .shutdown_on(async {
                match stop_signal().await {
                    Ok(signal) => tracing::info!("{signal}; stopping"),
                    Err(err) => stopped = Err(err),
                }
            })
            .await;
        Ok(stopped?)
    })
}
