//! [`Connect`]: the one upstream trait a session talks to.
//!
//! A stdio server, an HTTP server and a server set each implement it; [`Upstream`], the
//! configured value, picks its kind in this one place ([`Upstream::connector`]), so nothing
//! else matches on it to start, restart or reshape a connection. Every single server is
//! connected through the era adapter (`reverse_bridge`), so the session never learns which era
//! a server speaks; a set connects each of its servers through this same trait, one per slot.
//!
//! What a connection is, in the terms of the session:
//! - start: [`Connect::connect`], once per start (a restart is a new connection, and the
//!   handshake is replayed to it by [`Replay`](super::Replay), the one restart mechanism a
//!   session and each slot of a set share);
//! - send a line, its backlog, shut down, reshape (a set, `session/reload.rs`): the running
//!   [`UpstreamLink`];
//! - lines out: the [`Outlet`] it is given, which hands hook tasks their answers directly;
//! - status: a set's per-server status file (`ServerSet::status_file`), and
//!   [`UpstreamEvent::Closed`](super::UpstreamEvent::Closed) when a connection ends.

use std::fmt;

use super::{HttpUpstream, Outlet, ServerSet, StdioServer, Upstream, UpstreamLink, reverse_bridge};
use crate::error::UpstreamError;

/// An upstream the session can connect to (started once per session, and again after it dies).
pub(crate) trait Connect: fmt::Display + Send + Sync {
    /// Starts one connection (start number `generation`, which every event it reports
    /// carries); what it reads goes to `outlet`, lines over `max_line` bytes are refused.
    fn connect(
        &self,
        generation: u64,
        max_line: usize,
        outlet: Outlet,
    ) -> Result<UpstreamLink, UpstreamError>;
}

impl Connect for StdioServer {
    fn connect(
        &self,
        generation: u64,
        max_line: usize,
        outlet: Outlet,
    ) -> Result<UpstreamLink, UpstreamError> {
        reverse_bridge::connect(
            self.to_string(),
            self.era_record_of().cloned(),
            generation,
            outlet,
            |tx| self.spawn(generation, max_line, tx),
        )
    }
}

impl Connect for HttpUpstream {
    fn connect(
        &self,
        generation: u64,
        max_line: usize,
        outlet: Outlet,
    ) -> Result<UpstreamLink, UpstreamError> {
        reverse_bridge::connect(
            self.to_string(),
            self.era_record_of().cloned(),
            generation,
            outlet,
            |tx| self.spawn(generation, max_line, tx),
        )
    }
}

impl Connect for ServerSet {
    fn connect(
        &self,
        generation: u64,
        max_line: usize,
        outlet: Outlet,
    ) -> Result<UpstreamLink, UpstreamError> {
        self.spawn(generation, max_line, outlet)
    }
}

impl Upstream {
    /// The connection this upstream makes: the one place its kind is matched.
    pub(crate) fn connector(&self) -> &dyn Connect {
        match self {
            Upstream::Stdio(server) => server,
            Upstream::Http(server) => server,
            Upstream::Set(set) => set,
        }
    }

    /// Starts a connection to this upstream; what it reads goes to `outlet`.
    pub(crate) fn spawn(
        &self,
        generation: u64,
        max_line: usize,
        outlet: Outlet,
    ) -> Result<UpstreamLink, UpstreamError> {
        self.connector().connect(generation, max_line, outlet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_kind_connects_through_the_one_trait_and_a_failed_start_names_the_server() {
        let missing = StdioServer::new("/nonexistent/mcp-server");
        let set = ServerSet::new().server("only", missing.clone());
        for upstream in [Upstream::from(missing), Upstream::from(set)] {
            let (tx, _rx) = tokio::sync::mpsc::channel(1);
            let err = upstream
                .spawn(1, 1024, Outlet::new(tx))
                .expect_err("nothing to start");
            assert!(
                err.to_string().contains("/nonexistent/mcp-server"),
                "{upstream}: {err}"
            );
            assert_eq!(upstream.connector().to_string(), upstream.to_string());
        }
    }
}
