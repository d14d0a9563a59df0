//! The registry of proxy models linked into a binary.
//!
//! Every `#[proxy_model]` registers its [`ModelDescriptor`] with `inventory`, wherever it is
//! defined; a binary finds them all at run time without a central list. A crate that nothing
//! references can be dropped by the linker together with its registrations, so binaries
//! reference their model crates explicitly (see `mcpctl`).

use crate::error::ProxyError;
use crate::model::Registration;

pub use crate::model::ModelDescriptor;

/// Every registered model, sorted by name. Fails if two share a name, naming both.
///
/// ```
/// use mcp_middleware::prelude::*;
///
/// /// An example.
/// #[proxy_model(name = "doc-example")]
/// pub mod example {}
///
/// let found = mcp_middleware::registry::find("doc-example").unwrap();
/// assert_eq!(found.summary, "An example.");
/// ```
pub fn models() -> Result<Vec<&'static ModelDescriptor>, ProxyError> {
    let mut all: Vec<&'static ModelDescriptor> =
        inventory::iter::<Registration>().map(|r| r.0).collect();
    all.sort_by_key(|model| (model.name, model.defined_at));
    all.dedup_by(|a, b| a.same(b));
    for pair in all.windows(2) {
        if pair[0].name == pair[1].name {
            return Err(ProxyError::DuplicateModel {
                name: pair[0].name,
                first: pair[0].defined_at,
                second: pair[1].defined_at,
            });
        }
    }
    Ok(all)
}

/// The model called `name`.
pub fn find(name: &str) -> Result<&'static ModelDescriptor, ProxyError> {
    let all = models()?;
    all.iter()
        .find(|model| model.name == name)
        .copied()
        .ok_or_else(|| ProxyError::UnknownModel {
            name: name.to_owned(),
            known: all
                .iter()
                .map(|model| model.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}
