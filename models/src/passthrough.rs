//! `passthrough`: the identity model.

use mcp_middleware::proxy_model;

/// Does nothing: every message passes through unchanged.
///
/// The proxy still maps JSON-RPC ids and progress tokens per hop, restarts a dead upstream and
/// bridges protocol eras; nothing else differs from talking to the server directly.
#[proxy_model]
pub mod passthrough {}
