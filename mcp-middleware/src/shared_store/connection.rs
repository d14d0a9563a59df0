//! How every Redis client of the shared store connects and bounds its operations: the session
//! store (`redis`), the SSE event log (`events_redis`), the handshake fan-out and the shared
//! configuration each hold one such connection, opened the same way.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{StoreError, StoreTrust, redact};

/// A lazily made connection to one Redis, and how it is named in errors and logs.
pub(super) struct Opened {
    /// The URL without its password.
    pub(super) describe: String,
    /// For pub/sub connections of their own.
    pub(super) client: redis::Client,
    /// Made again by itself after the store went away.
    pub(super) connection: ConnectionManager,
}

/// Opens the Redis at `url` for `namespace`, each connection attempt and answer bounded by
/// `timeout`; nothing is sent yet. A malformed URL or namespace is a configuration error, as
/// are TLS settings for a `redis://` URL and certificate files that cannot be read.
pub(super) fn open(
    url: &str,
    namespace: &str,
    timeout: Duration,
    trust: &StoreTrust,
) -> Result<Opened, StoreError> {
    let describe = redact(url);
    let config_error = |reason: String| StoreError::Config {
        store: describe.clone(),
        reason,
    };
    if namespace.is_empty() || namespace.contains(['{', '}', ' ']) {
        return Err(config_error(format!(
            "the namespace `{namespace}` must be non-empty, without spaces or braces"
        )));
    }
    let client = client(url, trust).map_err(config_error)?;
    let settings = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    let connection = ConnectionManager::new_lazy_with_config(client.clone(), settings)
        .map_err(|err| config_error(err.to_string()))?;
    Ok(Opened {
        describe,
        client,
        connection,
    })
}

/// The client for `url`: for `rediss://`, one that verifies the server's certificate against
/// the system's roots or `trust`'s CA file, presenting `trust`'s client certificate if any.
fn client(url: &str, trust: &StoreTrust) -> Result<redis::Client, String> {
    let tls = url.starts_with("rediss://") || url.starts_with("valkeys://");
    // `#insecure` turns verification off in the redis crate: refused, never a silent downgrade.
    if url.contains('#') {
        return Err("a fragment (`#...`) is not accepted: TLS is always verified".to_owned());
    }
    if !tls {
        if trust.ca_file.is_some() || trust.client_identity.is_some() {
            return Err(
                "TLS certificates were given for a plain `redis://` URL (use `rediss://`)"
                    .to_owned(),
            );
        }
        return redis::Client::open(url).map_err(|err| err.to_string());
    }
    let read = |what: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|err| format!("the {what} {}: {err}", path.display()))
    };
    let root_cert = match &trust.ca_file {
        Some(path) => Some(read("CA file", path)?),
        None => None,
    };
    let client_tls = match &trust.client_identity {
        Some((cert, key)) => Some(redis::ClientTlsConfig {
            client_cert: read("client certificate file", cert)?,
            client_key: read("client key file", key)?,
        }),
        None => None,
    };
    redis::Client::build_with_tls(
        url,
        redis::TlsCertificates {
            client_tls,
            root_cert,
        },
    )
    .map_err(|err| err.to_string())
}

/// The start of every key (and channel) of project `namespace`: `mcpm:{namespace}:`, braces
/// literal. The braces make the project the keys' Redis Cluster hash tag, so every key one
/// script or `MULTI` touches is in one slot (a project's data lives on one cluster node;
/// projects spread over the nodes). `open` refuses a namespace with braces of its own.
pub(super) fn key_prefix(namespace: &str) -> String {
    format!("mcpm:{{{namespace}}}:")
}

/// Why the store named `describe` did not serve an operation.
pub(super) fn unavailable(describe: &str, reason: impl Into<String>) -> StoreError {
    StoreError::Unavailable {
        store: describe.to_owned(),
        reason: reason.into(),
    }
}

/// Runs the operation `op` makes within `timeout`, turning every failure into
/// [`StoreError::Unavailable`]. A connection found broken (the store restarted since the last
/// operation) is made again once and the operation tried on it: callers only pass operations
/// that are safe to repeat.
pub(super) async fn bounded<T, F>(
    describe: &str,
    connection: &ConnectionManager,
    timeout: Duration,
    mut op: impl FnMut(ConnectionManager) -> F,
) -> Result<T, StoreError>
where
    F: Future<Output = redis::RedisResult<T>>,
{
    let mut retried = false;
    loop {
        match tokio::time::timeout(timeout, op(connection.clone())).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(err)) if !retried && (err.is_connection_dropped() || err.is_io_error()) => {
                retried = true;
            }
            Ok(Err(err)) => return Err(unavailable(describe, err.to_string())),
            Err(_) => {
                return Err(unavailable(
                    describe,
                    format!("no answer within {} ms", timeout.as_millis()),
                ));
            }
        }
    }
}
