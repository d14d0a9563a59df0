//! Procedural macros of mcp-middleware.
//!
//! The `#[proxy_model]` attribute, which turns a module of hook functions into a proxy model,
//! lands here with the model framework (SPEC F1-F4). This crate is part of the fixed workspace
//! layout and has no public items yet.
#![forbid(unsafe_code)]
