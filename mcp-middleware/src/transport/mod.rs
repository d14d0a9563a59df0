//! Transports: how JSON-RPC lines get in and out of the proxy.
//!
//! A transport only frames messages; it knows nothing of MCP. The session above it sees lines.

pub(crate) mod cut_through;
pub mod lines;
pub(crate) mod outbound;
pub(crate) mod pipe_writer;
pub(crate) mod queue;
pub mod stdio;

pub use lines::{Frame, LineReader, write_lines};
