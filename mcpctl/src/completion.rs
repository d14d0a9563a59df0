//! `mcpctl completion SHELL`: shell completion scripts, generated from the command line's own
//! definition so they never drift from it.

use std::io::Write as _;

/// Prints the completion script for `shell` on stdout.
///
/// The script is generated into memory first: `clap_complete` panics when its writer fails,
/// and a reader that stops early (`mcpctl completion bash | head -1`) makes stdout's writes
/// fail. Written here, that is an error `main` recognises as a closed stdout, not a panic.
pub(crate) fn print(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut command = crate::cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "mcpctl", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}
