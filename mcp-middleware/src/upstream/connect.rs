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
//! - send a line, its backlog, shut down: the running [`UpstreamLink`];
//! - take a new configuration in place (`session/reload.rs`): [`Connect::reshape`], which
//!   only a set of several servers does;
//! - lines out: the [`Outlet`] it is given, which hands hook tasks their answers directly;
//! - status: a set's per-server status file (`ServerSet::status_file`), and
//!   [`UpstreamEvent::Closed`](super::UpstreamEvent::Closed) when a connection ends.

use std::fmt;

use super::{
    EraRecord, HttpUpstream, Outlet, ReaderOut, ServerSet, StdioServer, Upstream, UpstreamLink,
    reverse_bridge,
};
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

    /// Hands the running connection `link` the configuration `next` to take in place, and
    /// says whether it did. A set of several servers takes another such set server by server
    /// (only the servers added, removed or changed start or stop); anything else (the
    /// default) must restart the whole upstream instead.
    fn reshape(&self, next: &Upstream, link: &UpstreamLink) -> bool {
        let _ = (next, link);
        false
    }
}

/// One server, stdio or HTTP: what differs between the two when they connect. Both go through
/// the era adapter the same way, so they share one [`Connect`].
trait OneServer: fmt::Display + Send + Sync {
    /// Where the era it is seen speaking is recorded, if anywhere.
    fn record(&self) -> Option<&EraRecord>;

    /// Starts the server itself; what it reads goes to `events` (the era adapter's side).
    fn start(
        &self,
        generation: u64,
        max_line: usize,
        events: ReaderOut,
    ) -> Result<UpstreamLink, UpstreamError>;
}

impl OneServer for StdioServer {
    fn record(&self) -> Option<&EraRecord> {
        self.era_record_of()
    }

    fn start(
        &self,
        generation: u64,
        max_line: usize,
        events: ReaderOut,
    ) -> Result<UpstreamLink, UpstreamError> {
        self.spawn(generation, max_line, events)
    }
}

impl OneServer for HttpUpstream {
    fn record(&self) -> Option<&EraRecord> {
        self.era_record_of()
    }

    fn start(
        &self,
        generation: u64,
        max_line: usize,
        events: ReaderOut,
    ) -> Result<UpstreamLink, UpstreamError> {
        self.spawn(generation, max_line, events)
    }
}

impl<S: OneServer> Connect for S {
    fn connect(
        &self,
        generation: u64,
        max_line: usize,
        outlet: Outlet,
    ) -> Result<UpstreamLink, UpstreamError> {
        reverse_bridge::connect(
            self.to_string(),
            self.record().cloned(),
            generation,
            outlet,
            |tx| self.start(generation, max_line, tx),
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

    fn reshape(&self, next: &Upstream, link: &UpstreamLink) -> bool {
        let Upstream::Set(next) = next else {
            return false;
        };
        self.reshapes_to(next) && link.reshape(next.clone())
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
    use tokio::sync::mpsc;

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

    /// A link whose reshapes land in the returned receiver, as a running set's merger gets
    /// them.
    fn link() -> (UpstreamLink, mpsc::UnboundedReceiver<ServerSet>) {
        let (queue, _) = crate::transport::queue::LineQueue::new(1024);
        let (reshapes, taken) = mpsc::unbounded_channel();
        let link = UpstreamLink::new(queue, tokio::spawn(async {})).with_reshape(reshapes);
        (link, taken)
    }

    fn set(names: &[&str]) -> ServerSet {
        names.iter().fold(ServerSet::new(), |set, name| {
            set.server(*name, StdioServer::new(format!("/bin/{name}")))
        })
    }

    #[tokio::test]
    async fn only_a_set_of_several_servers_takes_a_new_set_in_place() {
        let (link, mut taken) = link();
        let running = Upstream::from(set(&["a", "b"]));
        let next = Upstream::from(set(&["a", "c"]));
        assert!(running.connector().reshape(&next, &link));
        assert_eq!(
            taken.try_recv().ok(),
            Some(set(&["a", "c"])),
            "the merger got it"
        );

        let one = Upstream::from(StdioServer::new("/bin/a"));
        assert!(
            !running.connector().reshape(&one, &link),
            "several to one restarts"
        );
        assert!(
            !one.connector().reshape(&next, &link),
            "one server never reshapes"
        );
        let lone = Upstream::from(set(&["a"]));
        assert!(
            !lone.connector().reshape(&next, &link),
            "one to several restarts"
        );
        assert!(taken.try_recv().is_err(), "nothing else was handed over");
    }
}
