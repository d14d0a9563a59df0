//! The MCP clients whose configuration files `mcpctl import` reads and `mcpctl install` writes:
//! Claude Desktop, Claude Code, Cursor and VS Code.
//!
//! Claude Desktop, Claude Code and Cursor keep servers under `mcpServers`; VS Code under
//! `servers`, with `inputs` it prompts for. VS Code's files are JSON with comments.

use std::path::PathBuf;

use anyhow::bail;

pub(crate) mod import;
pub(crate) mod install;
pub(crate) mod jsonc;

/// A client whose configuration file mcpctl knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Client {
    /// Claude Desktop (`claude_desktop_config.json`).
    ClaudeDesktop,
    /// Claude Code, project scope (`.mcp.json` in the current directory).
    ClaudeCode,
    /// Cursor (`~/.cursor/mcp.json`).
    Cursor,
    /// VS Code, workspace scope (`.vscode/mcp.json` in the current directory).
    Vscode,
}

impl Client {
    /// The top-level key holding the servers.
    pub(crate) fn servers_key(self) -> &'static str {
        match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// Its name as people know it.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
        }
    }

    /// Where the client reads its servers from, on this system.
    pub(crate) fn default_path(self) -> anyhow::Result<PathBuf> {
        Ok(match self {
            Client::ClaudeDesktop => claude_desktop_dir()?.join("claude_desktop_config.json"),
            Client::ClaudeCode => PathBuf::from(".mcp.json"),
            Client::Cursor => home()?.join(".cursor").join("mcp.json"),
            Client::Vscode => PathBuf::from(".vscode").join("mcp.json"),
        })
    }
}

/// Claude Desktop's configuration directory: `~/Library/Application Support/Claude` on macOS,
/// `%APPDATA%\Claude` on Windows, `$XDG_CONFIG_HOME/Claude` (default `~/.config/Claude`)
/// elsewhere.
fn claude_desktop_dir() -> anyhow::Result<PathBuf> {
    if cfg!(target_os = "macos") {
        return Ok(home()?.join("Library/Application Support/Claude"));
    }
    if cfg!(windows) {
        return match std::env::var_os("APPDATA").filter(|v| !v.is_empty()) {
            Some(dir) => Ok(PathBuf::from(dir).join("Claude")),
            None => bail!("APPDATA is not set: give the file with --file"),
        };
    }
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir).join("Claude")),
        None => Ok(home()?.join(".config").join("Claude")),
    }
}

fn home() -> anyhow::Result<PathBuf> {
    let var = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home)),
        None => bail!("{var} is not set: give the file with --file"),
    }
}

/// `text` in upper snake case (`api-key` -> `API_KEY`): a portable environment variable name.
pub(crate) fn upper_snake(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_owned();
    match out.chars().next() {
        None => "VALUE".to_owned(),
        Some(c) if c.is_ascii_digit() => format!("_{out}"),
        Some(_) => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_snake_makes_variable_names() {
        assert_eq!(upper_snake("api-key"), "API_KEY");
        assert_eq!(upper_snake("github.Token"), "GITHUB_TOKEN");
        assert_eq!(upper_snake("--x  y--"), "X_Y");
        assert_eq!(upper_snake("1st"), "_1ST");
        assert_eq!(upper_snake("é"), "VALUE");
    }
}
