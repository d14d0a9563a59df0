//! `mcpctl completion SHELL`: shell completion scripts, generated from the command line's own
//! definition so they never drift from it.

/// Prints the completion script for `shell` on stdout.
pub(crate) fn print(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut command = crate::cli::command();
    clap_complete::generate(shell, &mut command, "mcpctl", &mut std::io::stdout());
    Ok(())
}
