//! `GET /healthz` and `GET /readyz` on the MCP listener, for load balancers and orchestrators.
//!
//! `/healthz` answers `200` while the process serves. `/readyz` answers `200` when the shared
//! store (when one is configured) answers a ping and the application's [`Readiness`] check (an
//! upstream that starts, say) passes; otherwise `503` with `{"status":"not ready","reason":...}`.
//!
//! Both are served before the `Host`/`Origin` guard and without authentication: a Kubernetes
//! probe sends `Host: POD_IP:PORT`, which no allow-list names, and carries no credential. They
//! reveal nothing but status; when clients must authenticate, the reason is a generic one
//! (which part is not ready, not which server or store), and the full reason goes to the log.
//!
//! A check runs at most once per [`CHECK_EVERY`], whoever asks: a probe cannot be turned into
//! a way of starting upstreams in a loop.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use serde_json::json;

use crate::shared_store::SharedStore;

/// The liveness path.
pub(crate) const HEALTHZ: &str = "/healthz";
/// The readiness path.
pub(crate) const READYZ: &str = "/readyz";

/// How long a readiness answer is reused before the checks run again.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long the checks may take before the answer is "not ready".
const CHECK_WITHIN: Duration = Duration::from_secs(5);

/// Why the proxy is not ready: a detailed reason for its operator, and a generic one for an
/// unauthenticated caller of a front that requires credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// What is not ready, naming it (`upstream `x` is not running: ...`).
    pub reason: String,
    /// The same without names (`an upstream is not running`).
    pub generic: String,
}

impl NotReady {
    /// A reason, and its generic form.
    pub fn new(reason: impl Into<String>, generic: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            generic: generic.into(),
        }
    }
}

type CheckFuture = Pin<Box<dyn Future<Output = Result<(), NotReady>> + Send>>;

/// The application's part of `/readyz` (see [`HttpOptions::readiness`](super::HttpOptions::readiness)):
/// a check run at most every two seconds, within five.
///
/// ```
/// use mcp_middleware::http::{HttpOptions, NotReady, Readiness};
///
/// let options = HttpOptions::default().readiness(Readiness::new(|| async {
///     Err(NotReady::new("upstream `files` is not running", "an upstream is not running"))
/// }));
/// assert!(options.readiness.is_some());
/// ```
#[derive(Clone)]
pub struct Readiness(Arc<dyn Fn() -> CheckFuture + Send + Sync>);

impl Readiness {
    /// A check: `Ok` when ready.
    pub fn new<F, Fut>(check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), NotReady>> + Send + 'static,
    {
        Self(Arc::new(move || Box::pin(check())))
    }
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Readiness(..)")
    }
}

/// The health endpoints' state: what to check, and the last answer.
pub(crate) struct Health {
    readiness: Option<Readiness>,
    store: Option<SharedStore>,
    /// Whether clients must authenticate: reasons are generic then.
    guarded: bool,
    /// The last answer and when it was made; the lock also makes concurrent probes wait for
    /// one check instead of each running their own.
    last: tokio::sync::Mutex<Option<(Instant, Result<(), NotReady>)>>,
}

impl Health {
    pub(crate) fn new(options: &super::HttpOptions) -> Self {
        let client_certificates = options
            .tls
            .as_ref()
            .is_some_and(|tls| tls.client_certificate_mode().is_some());
        Self {
            readiness: options.readiness.clone(),
            store: options.shared_store.clone(),
            guarded: options.auth.is_required() || client_certificates,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether `path` is one of the health endpoints.
    pub(crate) fn serves(path: &str) -> bool {
        path == HEALTHZ || path == READYZ
    }

    /// The answer to `method path` (one of [`Self::serves`]'s), as a status and a JSON body.
    /// `closing` is the reason the front refuses new work, once shutdown has begun.
    pub(crate) async fn answer(
        &self,
        method: &Method,
        path: &str,
        closing: Option<String>,
    ) -> (StatusCode, String) {
        if method != Method::GET && method != Method::HEAD {
            let body = json!({"status": "error", "reason": "health endpoints take GET"});
            return (StatusCode::METHOD_NOT_ALLOWED, body.to_string());
        }
        if path == HEALTHZ {
            return (StatusCode::OK, json!({"status": "ok"}).to_string());
        }
        let outcome = match closing {
            Some(_) => Err(NotReady::new("shutting down", "shutting down")),
            None => self.ready().await,
        };
        match outcome {
            Ok(()) => (StatusCode::OK, json!({"status": "ready"}).to_string()),
            Err(not) => {
                let reason = if self.guarded {
                    not.generic
                } else {
                    not.reason
                };
                let body = json!({"status": "not ready", "reason": reason});
                (StatusCode::SERVICE_UNAVAILABLE, body.to_string())
            }
        }
    }

    /// The last answer if it is fresh, else a new one.
    async fn ready(&self) -> Result<(), NotReady> {
        let mut last = self.last.lock().await;
        if let Some((at, outcome)) = last.as_ref()
            && at.elapsed() < CHECK_EVERY
        {
            return outcome.clone();
        }
        let outcome = match tokio::time::timeout(CHECK_WITHIN, self.check()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(NotReady::new(
                "the readiness checks did not finish within 5 s",
                "the readiness checks did not finish in time",
            )),
        };
        // Said once per change, not at every probe.
        let changed = last.as_ref().is_none_or(|(_, before)| *before != outcome);
        if changed {
            match &outcome {
                Ok(()) => tracing::info!("ready"),
                Err(not) => tracing::warn!(reason = %not.reason, "not ready"),
            }
        }
        *last = Some((Instant::now(), outcome.clone()));
        outcome
    }

    async fn check(&self) -> Result<(), NotReady> {
        if let Some(store) = &self.store {
            store.ping().await.map_err(|err| {
                NotReady::new(
                    format!("the shared store does not answer: {err}"),
                    "the shared store does not answer",
                )
            })?;
        }
        match &self.readiness {
            Some(readiness) => (readiness.0)().await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Health, NotReady, Readiness};
    use crate::auth::{Auth, TokenList};
    use crate::http::HttpOptions;
    use hyper::{Method, StatusCode};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn failing(calls: Arc<AtomicUsize>) -> Readiness {
        Readiness::new(move || {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                Err(NotReady::new(
                    "upstream `x` is not running",
                    "an upstream is not running",
                ))
            }
        })
    }

    #[tokio::test]
    async fn readiness_names_the_reason_and_checks_at_most_every_two_seconds() {
        let calls = Arc::new(AtomicUsize::new(0));
        let health = Health::new(&HttpOptions::default().readiness(failing(calls.clone())));
        for _ in 0..3 {
            let (status, body) = health.answer(&Method::GET, "/readyz", None).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            assert!(body.contains("upstream `x` is not running"), "{body}");
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "one check for three probes"
        );
        let (status, _) = health.answer(&Method::GET, "/healthz", None).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_front_that_requires_credentials_gives_the_generic_reason() {
        let calls = Arc::new(AtomicUsize::new(0));
        let tokens = TokenList::new().with_token("alice", "0123456789abcdef0123456789abcdef");
        let options = HttpOptions::default()
            .auth(Auth::new().tokens(tokens))
            .readiness(failing(calls));
        let (status, body) = Health::new(&options)
            .answer(&Method::GET, "/readyz", None)
            .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body.contains("an upstream is not running") && !body.contains('`'),
            "{body}"
        );
    }

    #[tokio::test]
    async fn shutting_down_is_not_ready_and_other_methods_are_refused() {
        let health = Health::new(&HttpOptions::default());
        let (status, _) = health.answer(&Method::GET, "/readyz", None).await;
        assert_eq!(status, StatusCode::OK);
        let closing = Some("shutting down".to_owned());
        let (status, body) = health.answer(&Method::GET, "/readyz", closing).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let (status, _) = health.answer(&Method::POST, "/healthz", None).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    }
}
