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

/// How a [`StateDescriptor`] saves a state as JSON (`None`: the type is not serde).
pub type SaveState = fn(&(dyn Any + Send)) -> Option<Result<serde_json::Value, String>>;

/// How a [`StateDescriptor`] loads a state from JSON (`None`: the type is not serde).
pub type LoadState = fn(serde_json::Value) -> Option<Result<Box<dyn Any + Send>, String>>;

/// A model's per-session `State` type: how to make a fresh one, and (when the type implements
/// serde's `Serialize` and `DeserializeOwned`) how to save and load it, so a shared store
/// ([`crate::shared_store`]) can carry it from one replica to another.
///
/// `#[proxy_model]` fills the serde functions in by itself when the type is serde; a `State`
/// that is not works as before in-process and is refused by a shared store at start.
///
/// ```
/// use mcp_middleware::__private::StateDescriptor;
///
/// #[derive(Default, serde::Serialize, serde::Deserialize)]
/// struct Counter { calls: u64 }
///
/// let plain = StateDescriptor::of::<Counter>();
/// assert!(!plain.is_storable());
/// let stored = plain.storable::<Counter>();
/// let saved = stored.save(&Counter { calls: 3 }).unwrap().unwrap();
/// assert_eq!(saved, serde_json::json!({ "calls": 3 }));
/// let loaded = stored.load(saved).unwrap().unwrap();
/// assert_eq!(loaded.downcast_ref::<Counter>().map(|c| c.calls), Some(3));
/// ```
#[derive(Clone, Copy)]
pub struct StateDescriptor {
    /// The Rust type's name.
    pub type_name: fn() -> &'static str,
    /// The type's id, the key of the session's state map.
    pub type_id: fn() -> TypeId,
    /// A fresh `State::default()`.
    pub new: fn() -> Box<dyn Any + Send>,
    /// Saves a state as JSON; `None` when the type is not serde (not storable).
    pub save: SaveState,
    /// Loads a state saved by `save`; `None` when the type is not serde.
    pub load: LoadState,
}

impl fmt::Debug for StateDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateDescriptor")
            .field("type_name", &(self.type_name)())
            .field("storable", &self.is_storable())
            .finish_non_exhaustive()
    }
}

impl StateDescriptor {
    /// The descriptor of `S`, not storable.
    pub const fn of<S: Default + Send + 'static>() -> Self {
        Self {
            type_name: std::any::type_name::<S>,
            type_id: TypeId::of::<S>,
            new: new_state::<S>,
            save: not_storable_save,
            load: not_storable_load,
        }
    }

    /// The same descriptor, storable through serde (`S` must be the type it describes).
    pub const fn storable<S>(self) -> Self
    where
        S: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        Self {
            save: save_state::<S>,
            load: load_state::<S>,
            ..self
        }
    }

    /// The same descriptor with the given serde functions (what `#[proxy_model]` passes: its
    /// expansion picks them by whether the concrete type is serde).
    pub const fn with_store(self, save: SaveState, load: LoadState) -> Self {
        Self { save, load, ..self }
    }

    /// Whether a shared store can carry this state (its type is serde).
    pub fn is_storable(&self) -> bool {
        (self.load)(serde_json::Value::Null).is_some()
    }

    /// Saves `state` as JSON (`None`: not storable).
    pub fn save(&self, state: &(dyn Any + Send)) -> Option<Result<serde_json::Value, String>> {
        (self.save)(state)
    }

    /// Loads a state from JSON (`None`: not storable).
    pub fn load(&self, value: serde_json::Value) -> Option<Result<Box<dyn Any + Send>, String>> {
        (self.load)(value)
    }
}

fn new_state<S: Default + Send + 'static>() -> Box<dyn Any + Send> {
    Box::new(S::default())
}

fn not_storable_save(_: &(dyn Any + Send)) -> Option<Result<serde_json::Value, String>> {
    None
}

fn not_storable_load(_: serde_json::Value) -> Option<Result<Box<dyn Any + Send>, String>> {
    None
}

fn save_state<S: serde::Serialize + 'static>(
    state: &(dyn Any + Send),
) -> Option<Result<serde_json::Value, String>> {
    Some(match state.downcast_ref::<S>() {
        Some(state) => serde_json::to_value(state).map_err(|err| err.to_string()),
        None => Err(format!("not a `{}`", std::any::type_name::<S>())),
    })
}

fn load_state<S: serde::de::DeserializeOwned + Send + 'static>(
    value: serde_json::Value,
) -> Option<Result<Box<dyn Any + Send>, String>> {
    Some(
        serde_json::from_value::<S>(value)
            .map(|state| Box::new(state) as Box<dyn Any + Send>)
            .map_err(|err| err.to_string()),
    )
}

/// Autoref specialisation for `#[proxy_model]`: `(&&Probe::<S>::NEW).store()` is the serde
/// pair when `S` is serde (the `ViaSerde` impl on `&Probe<S>` matches first) and the
/// not-storable pair otherwise (`NotSerde` on `Probe<S>`, one more autoref away).
#[doc(hidden)]
pub mod state_probe {
    use super::StateDescriptor;
    use std::marker::PhantomData;

    /// The probe for `S`.
    pub struct Probe<S>(PhantomData<S>);

    impl<S> Probe<S> {
        /// The probe.
        pub const NEW: Self = Self(PhantomData);
    }

    /// Picked when `S` is serde.
    pub trait ViaSerde {
        /// Makes `descriptor` storable.
        fn store(&self, descriptor: StateDescriptor) -> StateDescriptor;
    }

    impl<S> ViaSerde for &Probe<S>
    where
        S: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        fn store(&self, descriptor: StateDescriptor) -> StateDescriptor {
            descriptor.storable::<S>()
        }
    }

    /// Picked when `S` is not serde.
    pub trait NotSerde {
        /// Leaves `descriptor` as it is.
        fn store(&self, descriptor: StateDescriptor) -> StateDescriptor;
    }

    impl<S> NotSerde for Probe<S> {
        fn store(&self, descriptor: StateDescriptor) -> StateDescriptor {
            descriptor
        }
    }
}

/// A model's registration with `inventory`. `#[proxy_model]` submits one per model.
#[derive(Debug)]
pub struct Registration(pub &'static ModelDescriptor);

inventory::collect!(Registration);
