//! `name = ".."` sets the model's registered name; the registry finds it by that name.

use mcp_middleware::prelude::*;

/// Named in kebab case.
#[proxy_model(name = "kebab-name")]
pub mod kebab {}

/// Extends a kebab-named model; messages use the given name.
#[proxy_model(extends = [kebab], name = "kebab-child")]
mod child {}

fn main() {
    let model = <kebab::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.name, "kebab-name");
    assert_eq!(model.summary, "Named in kebab case.");
    let found = mcp_middleware::registry::find("kebab-name").expect("registered");
    assert!(found.same(model));
    let child = mcp_middleware::registry::find("kebab-child").expect("registered");
    assert_eq!(child.parent_names(), ["kebab-name"]);
    assert!(mcp_middleware::registry::find("kebab").is_err());
}
