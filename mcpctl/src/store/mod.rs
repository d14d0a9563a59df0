//! The project store: `Server`, `Prompt` and `Project` resources kept as YAML files under
//! `$MCPCTL_HOME` (default `~/.mcpctl`), one file per resource:
//!
//! ```text
//! $MCPCTL_HOME/
//!   .lock                  advisory lock held by writers
//!   revision               raised by every write that changed something (see [`Store::revision`])
//!   running/               the proxies that follow the store (see [`running`])
//!   servers/NAME.yaml
//!   prompts/NAME.yaml
//!   projects/NAME.yaml
//! ```
//!
//! Every file holds one document in the shape `apply` reads (see [`resource`]), written in a
//! canonical form. Writes are atomic and serialised (see [`files`]): a command reads, checks and
//! writes under one lock, so two processes applying or editing at once lose nothing, and
//! nothing half-written is ever visible. References are kept whole: a project may only name
//! servers and prompts that exist, and a server or prompt a project names cannot be deleted.
//!
//! ```
//! use mcpctl::store::{AnyResource, Store, parse_documents};
//!
//! let home = std::env::temp_dir().join(format!("mcpctl-doc-{}", std::process::id()));
//! let store = Store::new(&home);
//! let text = "kind: Server\nmetadata: {name: echo}\nspec: {command: echo-server}\n";
//! let applied = store.apply(parse_documents("example.yaml", text)?)?;
//! assert_eq!(applied[0].to_string(), "server/echo created");
//! assert_eq!(store.list::<mcpctl::store::ServerSpec>()?.len(), 1);
//! # std::fs::remove_dir_all(&home).ok();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod auth;
pub mod error;
pub mod files;
pub mod parse;
pub mod project;
pub mod prompt;
pub mod resource;
pub(crate) mod revision;
pub mod running;
pub mod server;
pub mod validate;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

pub use error::{Located, StoreError};
pub use parse::{parse_documents, parse_every_document};
pub use project::{ProjectLlm, ProjectSpec, Routes};
pub use prompt::PromptSpec;
pub use resource::{AnyResource, Kind, Project, Prompt, Resource, Server, Spec, valid_name};
pub use server::{HttpSpec, ServerSpec, StdioSpec};

/// The environment variable naming the store's directory.
pub const HOME_VAR: &str = "MCPCTL_HOME";

/// What `apply` (or an edit) did to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// It did not exist and was written.
    Created,
    /// It existed and was changed.
    Configured,
    /// It existed with the same content; nothing was written.
    Unchanged,
}

impl Action {
    /// `created`, `configured` or `unchanged`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Unchanged => "unchanged",
        }
    }
}

/// One resource's outcome; displays like kubectl: `project/demo configured`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Its kind.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// What happened.
    pub action: Action,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} {}", self.kind, self.name, self.action.as_str())
    }
}

/// The store in one directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store in `root` (created on the first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The store in `$MCPCTL_HOME`, or `~/.mcpctl` when that is not set.
    pub fn from_env() -> Result<Self, StoreError> {
        if let Some(home) = std::env::var_os(HOME_VAR).filter(|h| !h.is_empty()) {
            return Ok(Self::new(home));
        }
        match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(home) => Ok(Self::new(PathBuf::from(home).join(".mcpctl"))),
            None => Err(StoreError::NoHome),
        }
    }

    /// Its directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file that holds `kind`/`name`.
    pub fn path_of(&self, kind: Kind, name: &str) -> PathBuf {
        self.root.join(kind.plural()).join(format!("{name}.yaml"))
    }

    /// Every resource of kind `S`, sorted by name. A bad file is an error naming it.
    pub fn list<S: Spec>(&self) -> Result<Vec<Resource<S>>, StoreError> {
        files::yaml_files(&self.root.join(S::KIND.plural()))?
            .iter()
            .map(|path| self.read_file::<S>(path))
            .collect()
    }

    /// The resource `name` of kind `S`.
    pub fn get<S: Spec>(&self, name: &str) -> Result<Resource<S>, StoreError> {
        if !valid_name(name) {
            return Err(self.not_found(S::KIND, name));
        }
        let path = self.path_of(S::KIND, name);
        if !path.is_file() {
            return Err(self.not_found(S::KIND, name));
        }
        self.read_file(&path)
    }

    /// Writes `resources` (servers and prompts first, then projects), after checking them
    /// together with what is stored: a project may name what this same call creates. Nothing
    /// is written when a check fails. Returns one outcome per resource, in the order given.
    pub fn apply(&self, resources: Vec<AnyResource>) -> Result<Vec<Applied>, StoreError> {
        let mut seen = BTreeSet::new();
        for resource in &resources {
            if !seen.insert((resource.kind(), resource.name().to_owned())) {
                return Err(StoreError::Duplicate {
                    kind: resource.kind(),
                    name: resource.name().to_owned(),
                });
            }
        }
        let _lock = self.lock()?;
        let mut servers = self.names(Kind::Server)?;
        let mut prompts = self.names(Kind::Prompt)?;
        for resource in &resources {
            match resource {
                AnyResource::Server(s) => servers.insert(s.name.clone()),
                AnyResource::Prompt(p) => prompts.insert(p.name.clone()),
                AnyResource::Project(_) => false,
            };
        }
        for resource in &resources {
            if let AnyResource::Project(project) = resource {
                let configs = validate::check_project(project, &servers, &prompts)?;
                validate::warn_unused(project, &configs);
            }
        }
        let mut outcomes = vec![None; resources.len()];
        for kind in Kind::ALL {
            for (i, resource) in resources.iter().enumerate() {
                if resource.kind() != kind {
                    continue;
                }
                outcomes[i] = Some(match resource {
                    AnyResource::Server(r) => self.write(r)?,
                    AnyResource::Prompt(r) => self.write(r)?,
                    AnyResource::Project(r) => self.write(r)?,
                });
            }
        }
        let applied: Vec<Applied> = outcomes.into_iter().flatten().collect();
        if applied.iter().any(|a| a.action != Action::Unchanged) {
            revision::bump(&self.root)?;
        }
        Ok(applied)
    }

    /// Deletes `kind`/`name`. A server or prompt that a project names is not deleted.
    pub fn delete(&self, kind: Kind, name: &str) -> Result<(), StoreError> {
        let _lock = self.lock()?;
        let path = self.path_of(kind, name);
        if !valid_name(name) || !path.is_file() {
            return Err(self.not_found(kind, name));
        }
        if kind != Kind::Project {
            let users: Vec<String> = self
                .list::<ProjectSpec>()?
                .into_iter()
                .filter(|p| {
                    let names = match kind {
                        Kind::Server => &p.spec.servers,
                        _ => &p.spec.prompts,
                    };
                    names.iter().any(|n| n == name)
                })
                .map(|p| p.name)
                .collect();
            if !users.is_empty() {
                return Err(StoreError::InUse {
                    kind,
                    name: name.to_owned(),
                    projects: users,
                });
            }
        }
        files::remove(&path)?;
        revision::bump(&self.root).map(drop)
    }

    /// Reads `name`, changes it with `edit`, checks it and writes it back, all under the lock
    /// (so concurrent edits of one resource each see the other's result). `edit` returns why it
    /// could not make its change, if it could not.
    pub fn update<S: Spec>(
        &self,
        name: &str,
        edit: impl FnOnce(&mut S) -> Result<(), String>,
    ) -> Result<Applied, StoreError> {
        let _lock = self.lock()?;
        let mut resource = self.get::<S>(name)?;
        edit(&mut resource.spec).map_err(|message| StoreError::Edit {
            kind: S::KIND,
            name: name.to_owned(),
            message,
        })?;
        if let AnyResource::Project(project) = S::wrap(resource.clone()) {
            let configs = validate::check_project(
                &project,
                &self.names(Kind::Server)?,
                &self.names(Kind::Prompt)?,
            )?;
            validate::warn_unused(&project, &configs);
        }
        let applied = self.write(&resource)?;
        if applied.action != Action::Unchanged {
            revision::bump(&self.root)?;
        }
        Ok(applied)
    }

    /// The store's revision: raised by one by every `apply`, `delete` and `update` that
    /// changed something. Proxies that follow the store say which revision they run
    /// ([`running`]).
    pub fn revision(&self) -> u64 {
        revision::read(&self.root)
    }

    fn lock(&self) -> Result<files::WriteLock, StoreError> {
        let lock = files::lock(&self.root)?;
        for kind in Kind::ALL {
            files::sweep_temporaries(&self.root.join(kind.plural()));
        }
        Ok(lock)
    }

    /// Writes one resource unless the stored one is the same. Call with the lock held.
    fn write<S: Spec>(&self, resource: &Resource<S>) -> Result<Applied, StoreError> {
        let path = self.path_of(S::KIND, &resource.name);
        let text = render(resource)?;
        let action = match std::fs::read_to_string(&path) {
            Ok(old) if old == text => Action::Unchanged,
            Ok(_) => Action::Configured,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Action::Created,
            Err(e) => return Err(StoreError::io("read", path, e)),
        };
        if action != Action::Unchanged {
            files::write_atomic(&path, &text)?;
        }
        Ok(Applied {
            kind: S::KIND,
            name: resource.name.clone(),
            action,
        })
    }

    fn read_file<S: Spec>(&self, path: &Path) -> Result<Resource<S>, StoreError> {
        let text = std::fs::read_to_string(path).map_err(|e| StoreError::io("read", path, e))?;
        let label = path.display().to_string();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let expected = format!("{} `{stem}`", S::KIND);
        let mut documents = parse_documents(&label, &text)?.into_iter();
        let (Some(found), None) = (documents.next(), documents.next()) else {
            return Err(StoreError::Misplaced {
                file: path.to_owned(),
                expected,
                found: "not exactly one resource".to_owned(),
            });
        };
        if found.kind() != S::KIND || found.name() != stem {
            return Err(StoreError::Misplaced {
                file: path.to_owned(),
                found: format!("{} `{}`", found.kind(), found.name()),
                expected,
            });
        }
        S::from_any(found).ok_or(StoreError::Misplaced {
            file: path.to_owned(),
            found: "another kind".to_owned(),
            expected,
        })
    }

    fn names(&self, kind: Kind) -> Result<BTreeSet<String>, StoreError> {
        Ok(files::yaml_files(&self.root.join(kind.plural()))?
            .iter()
            .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect())
    }

    fn not_found(&self, kind: Kind, name: &str) -> StoreError {
        StoreError::NotFound {
            kind,
            name: name.to_owned(),
        }
    }
}

/// The canonical YAML of a resource (what the store writes).
pub fn render<S: Spec>(resource: &Resource<S>) -> Result<String, StoreError> {
    yaml_serde::to_string(&resource.to_document()).map_err(|e| StoreError::Render {
        kind: S::KIND,
        name: resource.name.clone(),
        message: e.to_string(),
    })
}
