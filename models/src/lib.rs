//! The stock proxy models of mcp-middleware, one file each, each a `#[proxy_model]`
//! module re-exported at the crate root (`mcp_middleware_models::passthrough`).
//!
//! The content models, [`paginate`] and [`section_split`], implement only `transform_content`
//! and a synthetic tool, so they compose with models that hook requests (such as [`gate`], in
//! [`default`]). Several content models in one composition run innermost first (the last in
//! `extends` sees the server's text first) and need `chain = [transform_content]`:
//! `extends = [paginate, section_split]` splits, then pages what is still too large.
//!
//! ```
//! use mcp_middleware::prelude::*;
//! use mcp_middleware_models::{paginate, section_split};
//!
//! /// Tables of contents for large documents, pages for whatever is still too large.
//! #[proxy_model(extends = [paginate, section_split], chain = [transform_content])]
//! pub mod split_then_page {}
//!
//! let chain = mcp_middleware::chain::layers_of(<split_then_page::Model as ProxyModel>::DESCRIPTOR);
//! let names: Vec<&str> = chain.iter().map(|layer| layer.name).collect();
//! assert_eq!(names, ["split_then_page", "paginate", "section-split"]);
//! ```
//!
//! [`summarize`] replaces large tool results with a summary from `ctx.llm()` and keeps the
//! original readable through `paginate`'s `read_page`.
//!
//! [`audit`] only observes, so it composes with any model; [`audit_log`] reads and
//! checks the logs it writes.
//!
//! Linking this crate registers every model in it; [`all`] names them so a binary can refer to
//! the crate (and keep its registrations) explicitly.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use mcp_middleware::ProxyModel;

// Each file holds one model module; the file modules are private so the model modules can take
// the plain names at the root.
#[path = "audit.rs"]
mod audit_file;
// Code mode: behind the `codemode` feature, since it embeds a JavaScript engine.
#[cfg(feature = "codemode")]
#[path = "codemode/mod.rs"]
mod codemode_file;
// The audit log's format, writer and verification (`mcpctl audit verify`).
pub mod audit_log;
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
#[path = "summarize.rs"]
mod summarize_file;
// Page cutting and the bounded store, shared by paginate and section-split.
mod paging;
// How section-split takes Markdown, JSON and YAML apart.
mod sections;

pub use audit_file::audit;
#[cfg(feature = "codemode")]
pub use codemode_file::codemode;
pub use default_file::default;
pub use gate_file::gate;
pub use paginate_file::paginate;
pub use passthrough_file::passthrough;
pub use section_split_file::section_split;
pub use summarize_file::{summarize, summarize_text};

/// The names of the models this crate defines, sorted.
///
/// ```
/// assert!(mcp_middleware_models::all().contains(&"passthrough"));
/// ```
pub fn all() -> Vec<&'static str> {
    let mut names = vec![
        <audit::Model as ProxyModel>::DESCRIPTOR.name,
        #[cfg(feature = "codemode")]
        <codemode::Model as ProxyModel>::DESCRIPTOR.name,
        <default::Model as ProxyModel>::DESCRIPTOR.name,
        <gate::Model as ProxyModel>::DESCRIPTOR.name,
        <paginate::Model as ProxyModel>::DESCRIPTOR.name,
        <passthrough::Model as ProxyModel>::DESCRIPTOR.name,
        <section_split::Model as ProxyModel>::DESCRIPTOR.name,
        <summarize::Model as ProxyModel>::DESCRIPTOR.name,
        <summarize_text::Model as ProxyModel>::DESCRIPTOR.name,
    ];
    names.sort_unstable();
    names
}
