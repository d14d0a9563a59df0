//! Upstreams: the real MCP servers behind the proxy, and the connections to them.
//!
//! Today an upstream is a child process on stdio ([`StdioServer`]); HTTP upstreams and sets of
//! several upstreams come later and join here.

mod stdio;

pub(crate) use stdio::UpstreamLink;
pub use stdio::{StdioServer, UpstreamEvent};
