//! Procedural macros of mcp-middleware: `#[proxy_model]`. Use it through `mcp-middleware`, which
//! re-exports it (`mcp_middleware::proxy_model`, also in its prelude).
//!
//! How the macro is built (in the manner of serde_derive and thiserror-impl):
//!
//! - `attr`: the attribute's arguments (`extends`, `chain`, `name`, `crate`), spans kept.
//! - `ast`: the module: doc comment, hooks, `#[tool]`s, `#[observer]`s, `State`, `Config`.
//! - `catalogue`: the hook names, their ids and signatures, and "did you mean".
//! - `check`: duplicates, signatures, `chain` and `extends`; every error collected (`ctxt`).
//! - `expand`: the generated code (its module docs show the shape).
//! - `fallback`: after an error, a stand-in model so the error is not followed by a cascade.
//!
//! What it accepts and the diagnostics it gives are pinned by `mcp-middleware/tests/ui`.
#![forbid(unsafe_code)]

mod ast;
mod attr;
mod catalogue;
mod check;
mod ctxt;
mod expand;
mod fallback;

use proc_macro::TokenStream;

/// Turns a module into a proxy model. Use it as `mcp_middleware::proxy_model`, which
/// documents it with examples: they need the library, and a dev-dependency on it here would
/// compile a second copy of the library and its dependencies for this crate's tests.
#[proc_macro_attribute]
pub fn proxy_model(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::proxy_model(attr.into(), item.into()).into()
}

/// The macro's hook catalogue as a slice of `(name, id, params, output)`, for the library's test
/// that it agrees with the library's hook table (both are built from the same file; this proves
/// the two crates were built from the same version of it).
#[doc(hidden)]
#[proc_macro]
pub fn __hook_catalogue(_input: TokenStream) -> TokenStream {
    let entries = catalogue::HOOKS.iter().map(|hook| {
        let (name, id) = (hook.name, hook.id);
        let params = hook.params().unwrap_or_default();
        let output = hook.output();
        quote::quote! { (#name, #id, #params, #output) }
    });
    quote::quote! { &[#(#entries),*] }.into()
}
