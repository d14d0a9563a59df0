//! Upstreams: the real MCP servers behind the proxy, and the connections to them.
//!
//! An upstream is a child process on stdio ([`StdioServer`]), a server over streamable HTTP
//! ([`HttpUpstream`]), or several of these served as one ([`ServerSet`]); [`Upstream`] is any
//! of them. The session talks to each through one trait (`connect.rs`): it starts a
//! connection, sends it lines through the running link, gets what it reads through an outlet
//! (`outlet.rs`), and starts it again with the handshake replayed (`replay.rs`).

mod connect;
mod cut_stream;
mod env_refs;
mod environment;
pub mod era_probe;
mod event;
pub(crate) mod http;
mod http_body;
mod link;
mod outlet;
mod parent_death;
mod reader_out;
mod replay;
mod reverse_bridge;
mod set;
mod sse;
mod sse_parser;
mod stateless_http;
mod stdio;
mod stream_cancel;
pub(crate) mod token_exchange;

use std::fmt;

pub use env_refs::env_references;
/// For other `${env:VAR}` settings resolved in the proxy (the LLM endpoint's key).
pub(crate) use env_refs::resolve as resolve_env_refs;
pub use environment::{DEFAULT_INHERITED, EnvPolicy};
pub use era_probe::{Era, EraRecord, EraSeen, read_era_file};
pub use event::{AnswerTail, UpstreamEvent};
pub use http::HttpUpstream;
pub(crate) use link::UpstreamLink;
pub(crate) use outlet::{AnswerTap, Order, Outlet};
pub(crate) use reader_out::ReaderOut;
pub(crate) use replay::Replay;
pub use set::ServerSet;
pub use stdio::StdioServer;
pub use token_exchange::TokenExchange;

/// What a proxy talks to: one server, or several served as one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Upstream {
    /// One server, a child process on stdio.
    Stdio(StdioServer),
    /// One server over streamable HTTP.
    Http(HttpUpstream),
    /// Several servers merged into one surface.
    Set(ServerSet),
}

impl Upstream {
    /// Records the era this server is seen speaking in `record` (each time it is connected).
    /// A set records per server through its own servers' records; for it this does nothing.
    ///
    /// ```
    /// use mcp_middleware::upstream::{EraRecord, StdioServer, Upstream};
    /// let upstream = Upstream::from(StdioServer::new("node"))
    ///     .era_record(EraRecord::new("/tmp/p.eras.json", "everything"));
    /// assert_eq!(upstream.to_string(), "node");
    /// ```
    pub fn era_record(self, record: EraRecord) -> Self {
        match self {
            Upstream::Stdio(server) => Upstream::Stdio(server.era_record(record)),
            Upstream::Http(server) => Upstream::Http(server.era_record(record)),
            Upstream::Set(set) => Upstream::Set(set),
        }
    }
}

impl Upstream {
    /// The upstream of one session whose caller is `caller` (what token exchange acts for).
    pub(crate) fn for_caller(&self, caller: &token_exchange::Caller) -> Self {
        match self {
            Upstream::Stdio(server) => Upstream::Stdio(server.clone()),
            Upstream::Http(server) => Upstream::Http(server.for_caller(caller)),
            Upstream::Set(set) => Upstream::Set(set.for_caller(caller)),
        }
    }
}

impl From<StdioServer> for Upstream {
    fn from(server: StdioServer) -> Self {
        Upstream::Stdio(server)
    }
}

impl From<HttpUpstream> for Upstream {
    fn from(server: HttpUpstream) -> Self {
        Upstream::Http(server)
    }
}

impl From<ServerSet> for Upstream {
    fn from(set: ServerSet) -> Self {
        Upstream::Set(set)
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Upstream::Stdio(server) => server.fmt(f),
            Upstream::Http(server) => server.fmt(f),
            Upstream::Set(set) => set.fmt(f),
        }
    }
}
