//! Upstreams: the real MCP servers behind the proxy, and the connections to them.
//!
//! An upstream is a child process on stdio ([`StdioServer`]) or several of them served as one
//! ([`ServerSet`]); [`Upstream`] is either. HTTP upstreams join here later.

mod env_refs;
mod set;
mod stdio;

use std::fmt;

use tokio::sync::mpsc;

pub use set::ServerSet;
pub(crate) use stdio::UpstreamLink;
pub use stdio::{StdioServer, UpstreamEvent};

use crate::error::UpstreamError;

/// What a proxy talks to: one server, or several served as one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Upstream {
    /// One server, a child process on stdio.
    Stdio(StdioServer),
    /// Several servers merged into one surface.
    Set(ServerSet),
}

impl Upstream {
    pub(crate) fn spawn<E>(
        &self,
        generation: u64,
        max_line: usize,
        events: mpsc::Sender<E>,
    ) -> Result<UpstreamLink, UpstreamError>
    where
        E: From<UpstreamEvent> + Send + 'static,
    {
        match self {
            Upstream::Stdio(server) => server.spawn(generation, max_line, events),
            Upstream::Set(set) => set.spawn(generation, max_line, events),
        }
    }
}

impl From<StdioServer> for Upstream {
    fn from(server: StdioServer) -> Self {
        Upstream::Stdio(server)
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
            Upstream::Set(set) => set.fmt(f),
        }
    }
}
