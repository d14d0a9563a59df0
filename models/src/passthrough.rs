//! `passthrough` (SPEC M1): no hooks; the identity.
//!
//! Every message takes the proxy's forwarding path untouched. Useful on its own to put the proxy
//! in front of a server with nothing changed, and as the baseline that benchmarks compare.

use mcp_middleware::__private::inventory;
use mcp_middleware::registry::ModelInfo;

/// The model's name.
pub const NAME: &str = "passthrough";

inventory::submit! {
    ModelInfo {
        name: NAME,
        summary: "No hooks: every message passes through unchanged.",
        parents: &[],
        defined_at: module_path!(),
    }
}
