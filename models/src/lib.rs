//! The stock proxy models of mcp-middleware (SPEC M1-M7), one file each, each a `#[proxy_model]`
//! module re-exported at the crate root (`mcp_middleware_models::passthrough`).
//!
//! Linking this crate registers every model in it; [`all`] names them so a binary can refer to
//! the crate (and keep its registrations) explicitly.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use mcp_middleware::ProxyModel;

// Each file holds one model module; the file modules are private so the model modules can take
// the plain names at the root.
#[path = "default.rs"]
mod default_file;
#[path = "gate.rs"]
mod gate_file;
#[path = "paginate.rs"]
mod paginate_file;
#[path = "passthrough.rs"]
mod passthrough_file;
#[path = "section_split.rs"]
mod section_split_file;
// Page cutting and the bounded store, shared by paginate and section-split.
mod paging;
// How section-split takes Markdown, JSON and YAML apart.
mod sections;

pub use default_file::default;
pub use gate_file::gate;
pub use paginate_file::paginate;
pub use passthrough_file::passthrough;
pub use section_split_file::section_split;

/// The names of the models this crate defines, sorted.
///
/// ```
/// assert!(mcp_middleware_models::all().contains(&"passthrough"));
/// ```
pub fn all() -> Vec<&'static str> {
    let mut names = vec![
        <default::Model as ProxyModel>::DESCRIPTOR.name,
        <gate::Model as ProxyModel>::DESCRIPTOR.name,
        <paginate::Model as ProxyModel>::DESCRIPTOR.name,
        <passthrough::Model as ProxyModel>::DESCRIPTOR.name,
        <section_split::Model as ProxyModel>::DESCRIPTOR.name,
    ];
    names.sort_unstable();
    names
}
