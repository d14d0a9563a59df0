//! A model's per-session `State` type, described: how a session makes a fresh one and how a
//! shared store saves and loads it. Re-exported from [`crate::model`]; it lives below the
//! context ([`crate::context`] keeps the states a [`StateDescriptor`] makes), which sits below
//! the models.

use std::any::{Any, TypeId};
use std::fmt;

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
