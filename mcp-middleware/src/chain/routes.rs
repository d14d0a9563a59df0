//! Routing as the chain's built-in outermost and innermost steps, which
//! fail closed.
//!
//! [`Router::decide`](crate::routing) is the one decision; these steps are the only places
//! that ask it, each on the value that goes on from there:
//!
//! - **Outermost, on the way in** ([`Chain::enter`]): a client's request, before any model
//!   runs, on the raw path and the chain's alike: refused, past every hook to the upstream
//!   (no model takes the method, or it passes through), or into the hooks; the canonical
//!   params the router checked replace the client's.
//! - **Outermost, on the way out** ([`Chain::leave`]): what the models made of a listing loses
//!   hidden entries and gets the upstream's pass-through entries back.
//! - **Innermost, on the way in** ([`Chain::check_upstream_request`]): what the chain sends the
//!   upstream (`next` at the bottom of the chain, or a hook's own `ctx.upstream()`), decided
//!   again on that value, since a hook may have changed it: a call a hook turned into one for
//!   a hidden tool is refused here, and the upstream never sees it.
//! - **Innermost, on the way out** ([`Chain::filter_upstream_answer`]): an upstream listing loses its
//!   hidden entries before any model sees it.
//!
//! With no routes configured every step is free: nothing is read that was not read before.

use std::sync::{Arc, RwLock};

use rmcp::model::ErrorData;
use serde_json::Value;

use super::Chain;
use crate::auth::Identity;
use crate::routing::{Route, Router};

/// The shared slot every chain that follows live changes (`crate::live`) reads its routes from.
pub(crate) type RouterSlot = Arc<RwLock<Option<Arc<Router>>>>;

/// Where the outermost step sends a client request.
#[derive(Debug)]
pub(crate) enum Path {
    /// Answered with this error before any model runs (observers see it rejected).
    Refused(ErrorData),
    /// To the upstream as it is, past every hook but observers.
    Raw,
    /// Through the hooks (a listing with hidden entries goes this way even when no model
    /// hooks it, so its answer can be filtered).
    Hooks,
}

/// What the outermost step made of a client request.
#[derive(Debug)]
pub(crate) struct Entered {
    pub(crate) path: Path,
    /// When the router read the params: their canonical serialisation, which goes on in place
    /// of the client's text.
    pub(crate) params: Option<String>,
}

impl Chain {
    /// The outermost step on the way in: where a client request from `who` goes.
    pub(crate) fn enter(&self, method: &str, params: Option<&str>, who: &Identity) -> Entered {
        let hooks_or_raw = || {
            if self.intercepts_request(method) {
                Path::Hooks
            } else {
                Path::Raw
            }
        };
        let Some(router) = self.router() else {
            return Entered {
                path: hooks_or_raw(),
                params: None,
            };
        };
        let decision = router.decide(method, params, who);
        let path = match decision.route {
            Route::Refused(error) => Path::Refused(error),
            Route::Listing => Path::Hooks,
            Route::PassThrough => Path::Raw,
            Route::Chain => hooks_or_raw(),
        };
        Entered {
            path,
            params: decision.params,
        }
    }

    /// The outermost step on the way out: the chain's answer to `method` as the client gets
    /// it. `listed` gives the upstream's own entries of a listing, when it was asked.
    pub(crate) fn leave(
        &self,
        method: &str,
        outcome: Result<String, ErrorData>,
        listed: impl FnOnce() -> Option<Vec<Value>>,
        who: &Identity,
    ) -> Result<String, ErrorData> {
        match (self.router(), outcome) {
            (Some(router), Ok(result)) if router.is_listing(method) => {
                router.finish_listing(method, result, listed(), who)
            }
            (_, outcome) => outcome,
        }
    }

    /// The innermost step on the way in: the params to send the upstream for a request the
    /// chain makes, or the refusal. The router's canonical params replace `params` when it
    /// read them.
    pub(crate) fn check_upstream_request(
        &self,
        method: &str,
        params: Option<String>,
        who: &Identity,
    ) -> Result<Option<String>, ErrorData> {
        let Some(router) = self.router() else {
            return Ok(params);
        };
        Ok(router.check(method, params.as_deref(), who)?.or(params))
    }

    /// The innermost step on the way out: the upstream's answer as the models see it, and for
    /// a listing the upstream's pass-through entries (for [`Chain::leave`]).
    pub(crate) fn filter_upstream_answer(
        &self,
        method: &str,
        raw: String,
        who: &Identity,
    ) -> Result<(String, Option<Vec<Value>>), ErrorData> {
        match self.router() {
            Some(router) if router.is_listing(method) => {
                router.filter_upstream_listing(method, raw, who)
            }
            _ => Ok((raw, None)),
        }
    }
}
