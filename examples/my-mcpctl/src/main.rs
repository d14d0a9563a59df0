//! `my-mcpctl`: the whole `mcpctl` command line, with the `focused` model of this crate
//! registered beside the stock models.
//!
//! ```text
//! my-mcpctl get proxymodels
//! my-mcpctl proxy --model focused -- npx -y @modelcontextprotocol/server-everything
//! ```
#![forbid(unsafe_code)]

// The models live in this crate, so linking the binary links their `inventory` registrations.
mod models;

fn main() -> std::process::ExitCode {
    mcpctl::run()
}
