//! Proxy models: what `#[proxy_model]` turns a module into, and the pieces a model is made of.
//!
//! A model is a module marked `#[proxy_model]`. The macro adds a `Model` type to it that
//! implements [`ProxyModel`] (a [`ModelDescriptor`]: name, docs, parents, hooks, synthetic tools,
//! `State` and `Config`) and [`Layer`] (the hooks, callable by the chain), and registers it with
//! `inventory` so binaries find it by name ([`crate::registry`]).
//!
//! - [`hooks`]: the hook catalogue, what each hook receives and returns, and when it runs.
//! - [`Next`]: the rest of the chain, as a hook sees it.
//! - [`ToolDescriptor`], [`ToolOutput`]: synthetic tools.
//! - [`Content`]: what `transform_content` receives.
//! - [`Observation`]: what observers see.
//!
//! How models compose into one chain is in `crate::chain`; the compile-time conflict checks the
//! macro emits are in `compose`.

pub(crate) mod compose;
mod content;
pub(crate) mod hook_table;
pub mod hooks;
mod layer;
mod next;
mod observe;
mod schema;
mod tool;

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use content::{Content, ContentKind};
pub use hooks::{BoxFuture, HookId, HookResult, HookSet, RawNotification, RawRequest};
pub use layer::Layer;
pub use next::Next;
#[doc(hidden)]
pub use next::{End, Step, StepKind};
pub(crate) use observe::Subject;
pub use observe::{Observation, Outcome};
pub use tool::{
    ToolDescriptor, ToolOutput, arguments as tool_arguments, input_schema, no_arguments,
};
// Owned by `crate::model_state` (the context, below this module, keeps the states).
#[doc(hidden)]
pub use crate::model_state::state_probe;
pub use crate::model_state::{LoadState, SaveState, StateDescriptor};

/// A proxy model: the `Model` type `#[proxy_model]` adds to a module.
///
/// ```
/// use mcp_middleware::prelude::*;
///
/// /// Does nothing: every message passes through.
/// #[proxy_model]
/// pub mod identity {}
///
/// let descriptor = <identity::Model as ProxyModel>::DESCRIPTOR;
/// assert_eq!(descriptor.name, "identity");
/// assert_eq!(descriptor.summary, "Does nothing: every message passes through.");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a proxy model",
    label = "not a `#[proxy_model]` module's `Model`",
    note = "a proxy model is a module marked `#[proxy_model]`; `extends` names such modules"
)]
pub trait ProxyModel: Layer {
    /// Everything known about the model at compile time.
    const DESCRIPTOR: &'static ModelDescriptor;
}

/// What a model is: its name, docs, parents, hooks, synthetic tools, `State` and `Config`.
/// Built by `#[proxy_model]` as a constant; the registry hands these out.
pub struct ModelDescriptor {
    /// The model's unique name, as `--model` and `proxyModel` use it.
    pub name: &'static str,
    /// The first paragraph of the model's doc comment.
    pub summary: &'static str,
    /// The whole doc comment.
    pub docs: &'static str,
    /// The Rust module that defines the model; also its identity in conflict checks.
    pub defined_at: &'static str,
    /// The models it extends, in `extends` order.
    pub parents: &'static [&'static ModelDescriptor],
    /// The hooks the model's module defines.
    pub hooks: HookSet,
    /// The hooks named in `chain = [...]`: the parents' implementations run in `extends` order.
    pub chained: HookSet,
    /// For every hook (by [`HookId`] order), the model that answers for it in this model's
    /// composition, by `defined_at`; used by the compile-time conflict checks of children.
    pub owners: [Option<&'static str>; HookId::COUNT],
    /// The model's own synthetic tools.
    pub tools: &'static [ToolDescriptor],
    /// The names of the model's `#[observer]` functions.
    pub observers: &'static [&'static str],
    /// The model's hooks, callable.
    pub layer: &'static dyn Layer,
    /// The model's `Config`, if it declares one.
    pub config: Option<ConfigDescriptor>,
    /// The model's per-session `State`, if it declares one.
    pub state: Option<StateDescriptor>,
}

impl fmt::Debug for ModelDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelDescriptor")
            .field("name", &self.name)
            .field("defined_at", &self.defined_at)
            .field(
                "parents",
                &self.parents.iter().map(|p| p.name).collect::<Vec<_>>(),
            )
            .field("hooks", &self.hooks.iter().collect::<Vec<_>>())
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl ModelDescriptor {
    /// The names of the models this one extends, in `extends` order.
    pub fn parent_names(&self) -> Vec<&'static str> {
        self.parents.iter().map(|parent| parent.name).collect()
    }

    /// Whether two descriptors are the same model.
    pub fn same(&self, other: &ModelDescriptor) -> bool {
        self.defined_at == other.defined_at
    }
}

/// A model's `Config` type: how to read it from JSON and describe it.
#[derive(Clone, Copy)]
pub struct ConfigDescriptor {
    /// The Rust type's name.
    pub type_name: fn() -> &'static str,
    /// The type's id: `ctx.config::<C>()` finds it by this.
    pub type_id: fn() -> TypeId,
    /// Its JSON schema.
    pub schema: fn() -> Value,
    /// Reads it from the configured value (`None`: nothing configured, read as `{}`).
    pub load: fn(Option<&Value>) -> Result<LoadedConfig, ConfigFieldError>,
}

impl fmt::Debug for ConfigDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigDescriptor")
            .field("type_name", &(self.type_name)())
            .finish_non_exhaustive()
    }
}

impl ConfigDescriptor {
    /// The descriptor of `C`.
    pub const fn of<C>() -> Self
    where
        C: DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static,
    {
        Self {
            type_name: std::any::type_name::<C>,
            type_id: TypeId::of::<C>,
            schema: config_schema::<C>,
            load: load_config::<C>,
        }
    }
}

fn config_schema<C: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schema::root_schema_for::<C>()).unwrap_or(Value::Null)
}

/// A model's config once read: the `Config` value, found again by its type.
pub type LoadedConfig = Arc<dyn Any + Send + Sync>;

fn load_config<C>(value: Option<&Value>) -> Result<LoadedConfig, ConfigFieldError>
where
    C: DeserializeOwned + Send + Sync + 'static,
{
    let empty = Value::Object(Default::default());
    let value = value.unwrap_or(&empty);
    match serde_path_to_error::deserialize::<_, C>(value) {
        Ok(config) => Ok(Arc::new(config)),
        Err(err) => {
            let path = err.path().to_string();
            Err(ConfigFieldError {
                field: (path != ".").then_some(path),
                message: err.into_inner().to_string(),
            })
        }
    }
}

/// Why a model's configuration was refused: the field (a path such as `budget.bytes`) and what
/// was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFieldError {
    /// The field, when the error is about one.
    pub field: Option<String>,
    /// What was wrong.
    pub message: String,
}

/// A model's registration with `inventory`. `#[proxy_model]` submits one per model.
#[derive(Debug)]
pub struct Registration(pub &'static ModelDescriptor);

inventory::collect!(Registration);
