//! The library half of `mcpctl`: the project store that the CLI manages, usable on its own.
//!
//! [`store`] keeps `Server`, `Prompt` and `Project` resources as YAML under `$MCPCTL_HOME`.
//! The command line itself lives in the binary.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod store;
