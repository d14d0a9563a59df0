//! The shape every resource shares: `apiVersion`, `kind`, `metadata.name` and a `spec`.
//!
//! ```yaml
//! apiVersion: mcpctl/v1     # optional; the only version there is
//! kind: Server              # Server | Prompt | Project
//! metadata:
//!   name: everything        # letters, digits, `-`, `_`, `.`; starts with a letter or digit
//! spec: { ... }             # the kind's own fields
//! ```

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use super::project::ProjectSpec;
use super::prompt::PromptSpec;
use super::server::ServerSpec;

/// The `apiVersion` written into every stored file (and accepted, or absent, on input).
pub const API_VERSION: &str = "mcpctl/v1";

/// The kinds of resource the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// An MCP server: a command to run, or a URL.
    Server,
    /// A prompt a project offers its models.
    Prompt,
    /// Servers, prompts and a proxy model, served together.
    Project,
}

impl Kind {
    /// Every kind, in the order `apply` writes them (what a project names comes first).
    pub const ALL: [Kind; 3] = [Kind::Server, Kind::Prompt, Kind::Project];

    /// The lowercase singular name (`server`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Server => "server",
            Kind::Prompt => "prompt",
            Kind::Project => "project",
        }
    }

    /// The lowercase plural (`servers`), also the store's directory for the kind.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Server => "servers",
            Kind::Prompt => "prompts",
            Kind::Project => "projects",
        }
    }

    /// The `kind:` value (`Server`).
    pub fn title(self) -> &'static str {
        match self {
            Kind::Server => "Server",
            Kind::Prompt => "Prompt",
            Kind::Project => "Project",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The spec of one kind of resource.
pub trait Spec: Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug {
    /// The kind this spec belongs to.
    const KIND: Kind;

    /// Wraps a resource of this kind.
    fn wrap(resource: Resource<Self>) -> AnyResource;

    /// The resource inside `any`, if it is of this kind.
    fn from_any(any: AnyResource) -> Option<Resource<Self>>;
}

/// A named resource of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource<S> {
    /// `metadata.name`: unique within its kind, and its file's name.
    pub name: String,
    /// Its fields.
    pub spec: S,
}

impl<S: Spec> Resource<S> {
    /// The resource as one YAML document (what the store writes and `-o yaml` prints).
    pub fn to_document(&self) -> Document<'_, S> {
        Document {
            api_version: API_VERSION,
            kind: S::KIND.title(),
            metadata: Metadata {
                name: self.name.clone(),
            },
            spec: &self.spec,
        }
    }
}

/// A Server.
pub type Server = Resource<ServerSpec>;
/// A Prompt.
pub type Prompt = Resource<PromptSpec>;
/// A Project.
pub type Project = Resource<ProjectSpec>;

/// A resource of any kind, as `apply` reads them.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyResource {
    /// A Server.
    Server(Server),
    /// A Prompt.
    Prompt(Prompt),
    /// A Project.
    Project(Project),
}

impl AnyResource {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            AnyResource::Server(_) => Kind::Server,
            AnyResource::Prompt(_) => Kind::Prompt,
            AnyResource::Project(_) => Kind::Project,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            AnyResource::Server(r) => &r.name,
            AnyResource::Prompt(r) => &r.name,
            AnyResource::Project(r) => &r.name,
        }
    }
}

/// A resource laid out as YAML: `apiVersion`, `kind`, `metadata`, `spec`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Document<'a, S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: &'a S,
}

/// `metadata`: only the name, for now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Metadata {
    #[serde(deserialize_with = "name")]
    pub(crate) name: String,
}

/// The document as read, before its kind is known to match.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Envelope<S> {
    #[serde(default, rename = "apiVersion", deserialize_with = "api_version")]
    #[allow(dead_code)]
    pub(crate) api_version: Option<String>,
    #[allow(dead_code)]
    pub(crate) kind: Kind,
    pub(crate) metadata: Metadata,
    pub(crate) spec: S,
}

/// Only `kind`, to choose how to read the rest of a document.
#[derive(Debug, Deserialize)]
pub(crate) struct Header {
    pub(crate) kind: Kind,
}

/// Whether `name` may name a resource: 1 to 63 letters, digits, `-`, `_` or `.`, starting
/// with a letter or digit (it becomes a file name and a tool-name prefix).
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// What `valid_name` wants, for error messages.
pub(crate) const NAME_RULE: &str =
    "a name is 1 to 63 letters, digits, `-`, `_` or `.`, starting with a letter or digit";

/// Deserializes a resource name, refusing bad ones at their place in the file.
pub(crate) fn name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    checked_str(deserializer, "a resource name", |name| {
        if valid_name(name) {
            Ok(())
        } else {
            Err(format!("`{name}` is not a valid name: {NAME_RULE}"))
        }
    })
}

fn api_version<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    checked_str(deserializer, "an apiVersion", |version| {
        if version == API_VERSION {
            Ok(())
        } else {
            Err(format!(
                "apiVersion `{version}` is not supported; use `{API_VERSION}` (or leave it out)"
            ))
        }
    })
    .map(Some)
}

/// A string checked inside the deserializer's own call, so the YAML parser pins an error to the
/// string's line and column.
pub(crate) fn checked_str<'de, D: Deserializer<'de>>(
    deserializer: D,
    expecting: &'static str,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<String, D::Error> {
    struct Checked<F> {
        expecting: &'static str,
        check: F,
    }
    impl<F: Fn(&str) -> Result<(), String>> Visitor<'_> for Checked<F> {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.expecting)
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<String, E> {
            (self.check)(value).map_err(E::custom)?;
            Ok(value.to_owned())
        }
    }
    deserializer.deserialize_str(Checked { expecting, check })
}

/// Deserializes a map as `Raw`, then converts it with `TryFrom`, inside the parser's call for
/// the map: an error names the map's line and field path rather than the document's start.
pub(crate) fn checked_map<'de, D, Raw, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    Raw: Deserialize<'de>,
    T: TryFrom<Raw, Error = String>,
{
    struct Checked<Raw, T>(std::marker::PhantomData<(Raw, T)>);
    impl<'de, Raw: Deserialize<'de>, T: TryFrom<Raw, Error = String>> Visitor<'de> for Checked<Raw, T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = Raw::deserialize(de::value::MapAccessDeserializer::new(map))?;
            T::try_from(raw).map_err(de::Error::custom)
        }
    }
    deserializer.deserialize_map(Checked(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_and_prefix_safe() {
        for good in ["a", "everything", "my-server_2", "v1.2", "A"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            ".hidden",
            "a/b",
            "a b",
            "..",
            "é",
            &"a".repeat(64),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
