//! The stock proxy models of mcp-middleware (SPEC M1-M7), one module each.
//!
//! Linking this crate registers every model in it; [`all`] names them so a binary can refer to
//! the crate (and keep its registrations) explicitly.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod passthrough;

/// The names of the models this crate defines, sorted.
///
/// ```
/// assert!(mcp_middleware_models::all().contains(&"passthrough"));
/// ```
pub fn all() -> &'static [&'static str] {
    &[passthrough::NAME]
}
