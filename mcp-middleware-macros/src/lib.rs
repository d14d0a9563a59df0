//! Procedural macros of mcp-middleware: `#[proxy_model]`.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;

/// Turns a module into a proxy model. See the `mcp-middleware` crate.
#[proc_macro_attribute]
pub fn proxy_model(attr: TokenStream, item: TokenStream) -> TokenStream {
    let _ = attr;
    item
}
