//! Proxy models defined outside `mcp-middleware`, used by its trybuild cases to check
//! composition across crates. (Filled in with the `#[proxy_model]` macro.)
#![forbid(unsafe_code)]
