//! Request taps: what an embedding binary (metrics, traces, an admin view) learns of every
//! finished client request, from the one place that already knows it.
//!
//! The session computes an [`Observation`] for every request when the chain is observed (SPEC
//! F5); a tap is handed that same observation, with the request's [`Context`], after the
//! model observers. A proxy with a tap is observed even when no model observes, so every
//! request is seen, including rejected ones and those on pass-through and hidden routes.
//!
//! A tap runs on the session's loop: it must be quick and must not block (count, record,
//! send on a channel). A tap that panics is logged and the request is not affected.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use mcp_middleware::{Context, Proxy, model::Observation, request_tap::RequestTap, upstream::StdioServer};
//!
//! #[derive(Default)]
//! struct Count(AtomicU64);
//!
//! impl RequestTap for Count {
//!     fn request_finished(&self, _ctx: &Context, _observation: &Observation) {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//!
//! let count = Arc::new(Count::default());
//! let proxy = Proxy::new(StdioServer::new("my-server")).request_tap(count.clone());
//! # let _ = proxy;
//! ```

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::context::Context;
use crate::model::Observation;

/// Sees every finished client request: its context (session, identity, client info) and its
/// [`Observation`] (method, target, outcome, duration, error).
pub trait RequestTap: Send + Sync + 'static {
    /// Called once per finished request, on the session's loop (so: quick, never blocking).
    fn request_finished(&self, ctx: &Context, observation: &Observation);
}

impl<T: RequestTap + ?Sized> RequestTap for Arc<T> {
    fn request_finished(&self, ctx: &Context, observation: &Observation) {
        (**self).request_finished(ctx, observation);
    }
}

/// Every tap of a proxy, in the order they were added.
#[derive(Clone, Default)]
pub(crate) struct Taps(Vec<Arc<dyn RequestTap>>);

impl std::fmt::Debug for Taps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Taps({})", self.0.len())
    }
}

impl Taps {
    pub(crate) fn push(&mut self, tap: Arc<dyn RequestTap>) {
        self.0.push(tap);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Tells every tap; a panicking tap is logged and skipped.
    pub(crate) fn finished(&self, ctx: &Context, observation: &Observation) {
        for tap in &self.0 {
            let call = AssertUnwindSafe(|| tap.request_finished(ctx, observation));
            if std::panic::catch_unwind(call).is_err() {
                tracing::warn!("a request tap panicked");
            }
        }
    }
}
