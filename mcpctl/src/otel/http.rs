//! The OTLP exporter's HTTP client: hyper (HTTP/1.1) and rustls, which the proxy already
//! builds on, instead of the exporter's default reqwest stack.
//!
//! The SDK's batch processor exports from a thread of its own, outside any async runtime, so
//! the client owns a small current-thread runtime and runs each export on it; called from
//! inside a runtime it runs on that one instead. One connection per export: a batch goes out
//! every few seconds at most, and nothing is left open between them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::rt::TokioIo;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use tokio::net::TcpStream;

/// How long one export may take, connection included, unless `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`
/// or `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds) says otherwise: the SDK's default.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a collector's answer that is read (it is a small protobuf status).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Sends OTLP requests over `http://` or `https://`.
pub(super) struct OtlpClient {
    runtime: tokio::runtime::Runtime,
    tls: tokio_rustls::TlsConnector,
    timeout: Duration,
}

impl fmt::Debug for OtlpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OtlpClient")
    }
}

impl OtlpClient {
    pub(super) fn new() -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("cannot start the exporter's runtime: {err}"))?;
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| format!("TLS setup failed: {err}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let timeout = [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .into_iter()
        .find_map(|var| std::env::var(var).ok()?.trim().parse().ok())
        .map_or(EXPORT_TIMEOUT, Duration::from_millis);
        Ok(Self {
            runtime,
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            timeout,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let exchange = send(self.tls.clone(), request, self.timeout);
        if tokio::runtime::Handle::try_current().is_ok() {
            exchange.await
        } else {
            self.runtime.block_on(exchange)
        }
    }
}

async fn send(
    tls: tokio_rustls::TlsConnector,
    request: Request<Bytes>,
    timeout: Duration,
) -> Result<Response<Bytes>, HttpError> {
    match tokio::time::timeout(timeout, exchange(tls, request)).await {
        Ok(answer) => answer,
        Err(_) => Err(format!(
            "the OTLP endpoint did not answer within {} ms",
            timeout.as_millis()
        )
        .into()),
    }
}

async fn exchange(
    tls: tokio_rustls::TlsConnector,
    request: Request<Bytes>,
) -> Result<Response<Bytes>, HttpError> {
    let (mut parts, body) = request.into_parts();
    let uri = parts.uri.clone();
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => {
            return Err("the OTLP endpoint is not http:// or https://"
                .to_owned()
                .into());
        }
    };
    let Some(authority) = uri.authority().cloned() else {
        return Err("the OTLP endpoint has no host".to_owned().into());
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let stream = TcpStream::connect((host, port)).await?;
    // HTTP/1.1 to the origin: the path in the request line, the authority in `Host`.
    parts.uri = uri
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .parse()?;
    parts
        .headers
        .insert(hyper::header::HOST, authority.as_str().parse()?);
    let request = Request::from_parts(parts, Full::new(body));
    if https {
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())?;
        round_trip(TokioIo::new(tls.connect(name, stream).await?), request).await
    } else {
        round_trip(TokioIo::new(stream), request).await
    }
}

async fn round_trip<T>(io: T, request: Request<Full<Bytes>>) -> Result<Response<Bytes>, HttpError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    // The connection is driven beside the exchange; it ends when `sender` is dropped.
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!("OTLP connection: {err}");
        }
    });
    let answer = sender.send_request(request).await?;
    let (parts, body) = answer.into_parts();
    let body = Limited::new(body, MAX_ANSWER_BYTES)
        .collect()
        .await?
        .to_bytes();
    Ok(Response::from_parts(parts, body))
}
