//! `mcpctl`: run the proxy models linked into this binary in front of real MCP servers, and
//! manage the projects (servers, prompts, a model and its config) they serve.
//!
//! The whole command line is in this library, so a crate with models of its own ships its own
//! `mcpctl` with one line of `main`: every command, with its `#[proxy_model]`s
//! registered beside the stock ones through `inventory`.
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     mcpctl::run()
//! }
//! ```
//!
//! [`store`] keeps `Server`, `Prompt` and `Project` resources as YAML under `$MCPCTL_HOME`, and
//! is usable on its own.
//!
//! # Cargo features
//!
//! - `codemode` (default): the code-mode model of `mcp-middleware-models` and what it pulls in
//!   (a JavaScript engine). `default-features = false` leaves it out.
//! - `otel` (default): OpenTelemetry traces over OTLP/HTTP, on when `OTEL_EXPORTER_OTLP_ENDPOINT`
//!   is set (README, "Traces (OpenTelemetry)").
//!
//! # Exit codes
//!
//! 0 success (for `proxy`, the client closed the session or a stop signal arrived); 1 an error
//! (the message on stderr says what and where); 2 a usage error; 3 a named resource (project,
//! server, prompt or proxy model) does not exist.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

// The command modules name the store by the crate's public name, as a downstream crate would.
extern crate self as mcpctl;

mod admin;
mod apply;
mod audit;
mod cli;
mod client;
mod clients;
mod completion;
mod edit;
mod live;

mod eras;
mod model_config;
mod models;
mod otel;
mod output;
mod proxy;
mod resources;
mod run;
mod serve;
pub mod store;

pub use run::run;

/// The admin API's parsing of request bytes (the login form, `POST /api/apply` bodies), pure
/// functions exposed for the `admin_request` fuzz target.
pub mod admin_request {
    pub use crate::admin::request::{ApplyBodyError, form_value, parse_apply_body};
}
