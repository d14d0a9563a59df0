//! The registry of proxy models linked into a binary (SPEC F10).
//!
//! Every model registers a [`ModelInfo`] with `inventory`, wherever it is defined; a binary finds
//! them all at run time without a central list. A crate that nothing references can be dropped by
//! the linker together with its registrations, so binaries reference their model crates
//! explicitly (see `mcpctl`).

use crate::error::ProxyError;

/// What the registry knows about one proxy model.
///
/// ```
/// use mcp_middleware::registry::{self, ModelInfo};
///
/// mcp_middleware::__private::inventory::submit! {
///     ModelInfo { name: "doc-example", summary: "An example.", parents: &[], defined_at: module_path!() }
/// }
///
/// let found = registry::find("doc-example").unwrap();
/// assert_eq!(found.summary, "An example.");
/// ```
#[derive(Debug)]
pub struct ModelInfo {
    /// The model's unique name, as used by `--model` and `proxyModel`.
    pub name: &'static str,
    /// The first paragraph of the model's documentation.
    pub summary: &'static str,
    /// The models it extends, outermost first.
    pub parents: &'static [&'static str],
    /// The Rust module that defines it, for error messages.
    pub defined_at: &'static str,
}

inventory::collect!(ModelInfo);

/// Every registered model, sorted by name. Fails if two share a name.
pub fn models() -> Result<Vec<&'static ModelInfo>, ProxyError> {
    let mut all: Vec<&'static ModelInfo> = inventory::iter::<ModelInfo>().collect();
    all.sort_by_key(|model| (model.name, model.defined_at));
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
pub fn find(name: &str) -> Result<&'static ModelInfo, ProxyError> {
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
