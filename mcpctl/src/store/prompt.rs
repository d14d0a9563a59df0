//! `kind: Prompt`: text a project offers its models (gate hands the best ones over at
//! `begin_session`).
//!
//! ```yaml
//! kind: Prompt
//! metadata: { name: style-guide }
//! spec:
//!   tags: [style, review]
//!   content: |
//!     Use British spelling. Keep functions under 40 lines.
//! ```

use serde::{Deserialize, Serialize};

use super::resource::{AnyResource, Kind, Resource, Spec};

/// A prompt's tags and text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// Words that say what it is about (matched against `begin_session`'s tags and intent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The text.
    pub content: String,
}

impl Spec for PromptSpec {
    const KIND: Kind = Kind::Prompt;

    fn wrap(resource: Resource<Self>) -> AnyResource {
        AnyResource::Prompt(resource)
    }

    fn from_any(any: AnyResource) -> Option<Resource<Self>> {
        match any {
            AnyResource::Prompt(resource) => Some(resource),
            _ => None,
        }
    }
}
