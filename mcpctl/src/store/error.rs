//! Everything that can go wrong in the store, each as one sentence naming what and where.

use std::fmt;
use std::path::PathBuf;

use super::resource::Kind;

/// An error from the project store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Neither `MCPCTL_HOME` nor `HOME` is set, so the store has no place.
    #[error("cannot find the mcpctl home: set MCPCTL_HOME (or HOME, for the default ~/.mcpctl)")]
    NoHome,
    /// A file or directory could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "write", "create the directory", ...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A YAML document is malformed or does not describe a valid resource.
    #[error(transparent)]
    Parse(#[from] Located),
    /// A file in the store holds a resource other than the one its place says.
    #[error(
        "{} holds {found}, but a file there must hold {expected} (its file name is the resource's name)",
        file.display()
    )]
    Misplaced {
        /// The file.
        file: PathBuf,
        /// What the file's place says it holds, as `kind `name``.
        expected: String,
        /// What it holds.
        found: String,
    },
    /// No resource of that kind and name exists.
    #[error("{kind} `{name}` not found (`mcpctl get {}` lists them)", kind.plural())]
    NotFound {
        /// Its kind.
        kind: Kind,
        /// Its name.
        name: String,
    },
    /// One `apply` names the same resource twice.
    #[error("{kind} `{name}` is given twice in one apply; give each resource once")]
    Duplicate {
        /// Its kind.
        kind: Kind,
        /// Its name.
        name: String,
    },
    /// A project names a server or prompt that does not exist.
    #[error(
        "project `{project}` names {kind} `{name}`, which does not exist (apply the {kind} first, or in the same file)"
    )]
    UnknownReference {
        /// The project.
        project: String,
        /// The kind of what it names.
        kind: Kind,
        /// The missing name.
        name: String,
    },
    /// A project's `proxyModel` is not linked into this binary.
    #[error(
        "project `{project}` uses proxy model `{model}`{}, which this binary does not have (it has: {known})",
        if *from_gated { " (from `gated: true`)" } else { "" }
    )]
    UnknownModel {
        /// The project.
        project: String,
        /// The model it names.
        model: String,
        /// Whether the name came from the deprecated `gated: true`.
        from_gated: bool,
        /// The models that exist, comma separated.
        known: String,
    },
    /// A project's per-model config is refused by the model.
    #[error("project `{project}`: {message}")]
    BadConfig {
        /// The project.
        project: String,
        /// What the model said, naming the model and field.
        message: String,
    },
    /// A server or prompt cannot be deleted while projects use it.
    #[error(
        "{kind} `{name}` is used by project{} {}; remove it from {} first",
        if projects.len() == 1 { "" } else { "s" },
        projects.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", "),
        if projects.len() == 1 { "that project" } else { "those projects" }
    )]
    InUse {
        /// Its kind.
        kind: Kind,
        /// Its name.
        name: String,
        /// The projects that name it.
        projects: Vec<String>,
    },
    /// A resource could not be written as YAML.
    #[error("cannot write {kind} `{name}` as YAML: {message}")]
    Render {
        /// Its kind.
        kind: Kind,
        /// Its name.
        name: String,
        /// Why.
        message: String,
    },
    /// An edit could not be made.
    #[error("cannot edit {kind} `{name}`: {message}")]
    Edit {
        /// Its kind.
        kind: Kind,
        /// Its name.
        name: String,
        /// Why.
        message: String,
    },
}

impl StoreError {
    /// Whether the error says that a named resource does not exist (`mcpctl` exits with 3).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// A problem at a place in a YAML file: the file, the line and column when known, the field
/// (a path such as `spec.servers[1]`) when known, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file (`<stdin>` for standard input).
    pub file: String,
    /// The line, from 1.
    pub line: Option<usize>,
    /// The column, from 1.
    pub column: Option<usize>,
    /// The field, as a dotted path.
    pub field: Option<String>,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
            if let Some(column) = self.column {
                write!(f, ", column {column}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Located {}
