//! Output formats shared by the listing and describing commands: `-o table|yaml|json`.

use std::io::Write;

use clap::ValueEnum;
use serde_json::Value;

/// How a command prints what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// Aligned columns (lists) or `Key: value` lines (describe), for people.
    Table,
    /// YAML, for people and scripts.
    Yaml,
    /// JSON, for scripts.
    Json,
}

/// Prints `value` as YAML or JSON on stdout.
pub(crate) fn print_data(output: Output, value: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match output {
        Output::Json | Output::Table => writeln!(out, "{}", serde_json::to_string_pretty(value)?)?,
        Output::Yaml => write!(out, "{}", yaml_serde::to_string(value)?)?,
    }
    Ok(())
}

/// Prints rows under a header in aligned columns; the last column is not padded.
pub(crate) fn print_table(header: &[&str], rows: &[Vec<String>]) -> anyhow::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = std::io::stdout().lock();
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        text.trim_end().to_owned()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}

/// Prints resources as YAML documents separated by `---` (so the output can be applied again)
/// or as JSON: one object for a single named resource, else an array.
pub(crate) fn print_documents(
    output: Output,
    documents: &[Value],
    one: bool,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match output {
        Output::Yaml => {
            for (i, document) in documents.iter().enumerate() {
                if i > 0 {
                    writeln!(out, "---")?;
                }
                write!(out, "{}", yaml_serde::to_string(document)?)?;
            }
        }
        Output::Json | Output::Table => {
            let text = match documents {
                [document] if one => serde_json::to_string_pretty(document)?,
                _ => serde_json::to_string_pretty(documents)?,
            };
            writeln!(out, "{text}")?;
        }
    }
    Ok(())
}

/// `println!` that returns the write's error instead of panicking (say, when stdout's reader has
/// gone: `mcpctl get projects | head -1`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` that returns the write's error instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

pub(crate) use {out, outln};
