//! `mcpctl`: the command line of [`mcpctl::run`], with the stock proxy models.
//!
//! A crate with models of its own gets the same CLI with this same line (README, "Your own
//! mcpctl").
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    mcpctl::run()
}
