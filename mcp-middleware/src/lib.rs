//! # mcp-middleware
//!
//! A transparent, fast proxy for the Model Context Protocol, and the framework for the *proxy
//! models* that run inside it.
//!
//! An MCP client talks to the proxy as if it were the server; the proxy talks to the real server
//! as if it were the client. A message no model intercepts passes through unchanged: the proxy
//! reads only the JSON-RPC envelope, swaps the id (and progress token) for its own, and writes the
//! rest of the bytes out as they came ([`jsonrpc`]). Nothing the server sends is dropped, even
//! fields and methods this crate has never heard of.
//!
//! ```no_run
//! use mcp_middleware::{Proxy, registry, upstream::StdioServer};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = StdioServer::new("node").args(["server.js", "stdio"]);
//!     Proxy::new(server).serve_stdio().await?;
//!     Ok(())
//! }
//! ```
//!
//! ## Where things live
//!
//! - [`proxy`]: the entry point, [`Proxy`].
//! - `session`: one client connection, the forwarding loop, id and token maps, restarts.
//! - [`era`]: bridging 2025-11-25 (handshake) and 2026-07-28 (stateless) peers.
//! - [`jsonrpc`]: the envelope, read without parsing payloads, and message writers.
//! - [`transport`]: newline-delimited framing and the process's own stdio.
//! - [`upstream`]: the servers behind the proxy.
//! - [`registry`]: the proxy models linked into a binary.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod era;
pub mod error;
pub mod jsonrpc;
pub mod proxy;
pub mod registry;
mod session;
pub mod transport;
pub mod upstream;

pub use error::{ProxyError, UpstreamError};
pub use proxy::Proxy;
pub use session::SessionOptions;

/// Items the generated code of `#[proxy_model]` and registration macros refer to. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
}
