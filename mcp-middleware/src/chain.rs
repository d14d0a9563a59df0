//! Composition at run time: a model and its ancestors flattened into one chain, and for
//! every hook the steps that run.
//!
//! **Order.** The chain is the model, then its parents in `extends` order, each followed by its
//! own parents, depth first; a model reached twice (a diamond) is kept at its first place only.
//! A request enters the outermost model first and reaches the upstream last.
//!
//! **Which implementations run.** For each hook, every model in the chain that implements it
//! runs, outermost first, with one exception: a model that implements a hook which two or more of
//! its parents' compositions also answer for *replaces* them (that is how it resolves the
//! conflict, which is otherwise a compile error); their implementations then run only if it
//! calls them itself. `chain = [on_x]` keeps them all instead.
//!
//! **Within one model**, its own hook comes first, then its synthetic tools, then its content
//! transform: a model's `on_tools_list` sees its own tools in the listing (and may hide them, as
//! `gate` hides `begin_session` once a session is open), its `on_tool_call` sees calls to them,
//! and its transform applies to what comes from further in.
//!
//! **Routes.** The chain also carries the proxy's routing paths (`crate::routing`): what is
//! hidden from every model and what passes by them all. They run as the chain's built-in
//! outermost and innermost steps (`routes`), the only places the routing decision is made.
//!
//! **Cost.** A hook no model implements has no steps, and the session forwards such messages as
//! raw bytes without building a context (see `session`), so it costs nothing.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::auth::Identity;
use crate::context::{BelowChain, SessionChain};
use crate::error::{HookResult, ProxyError};
use crate::model::{HookId, ModelDescriptor, StateDescriptor, Step, StepKind};
use crate::routing::{Router, Routes};
use crate::upstream::Upstream;

mod routes;

pub(crate) use routes::{Path, RouterSlot};

/// A model composed for running: its flattened layers, the steps of every hook, every model's
/// validated config and the state types a session needs.
pub struct Chain {
    model: Option<&'static ModelDescriptor>,
    order: Vec<&'static ModelDescriptor>,
    steps: Vec<Vec<Step>>,
    configs: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    states: Vec<StateDescriptor>,
    observed: bool,
    /// The routing paths (hidden and pass-through routes); `None` when none are configured.
    router: Option<Arc<Router>>,
    /// Set when the proxy follows a [`Live`](crate::live::Live) handle: the routes are read
    /// from this slot, shared by every session, instead of `router`.
    live_router: Option<RouterSlot>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("model", &self.model.map(|m| m.name))
            .field("layers", &self.layer_names())
            .finish_non_exhaustive()
    }
}

impl Chain {
    /// The empty chain: every message passes through.
    pub fn empty() -> Self {
        Self {
            model: None,
            order: Vec::new(),
            steps: HookId::ALL.iter().map(|_| Vec::new()).collect(),
            configs: HashMap::new(),
            states: Vec::new(),
            observed: false,
            router: None,
            live_router: None,
        }
    }

    /// Composes `model` and validates every layer's config. `configs` maps model names to their
    /// config values; a name not in the chain, or a value its model refuses, is an error naming
    /// the model and the field.
    pub fn new(
        model: &'static ModelDescriptor,
        configs: &Map<String, Value>,
    ) -> Result<Self, ProxyError> {
        let mut order = Vec::new();
        flatten(model, &mut order);
        for name in configs.keys() {
            if !order.iter().any(|layer| layer.name == name) {
                return Err(ProxyError::Config {
                    model: name.clone(),
                    field: None,
                    message: format!(
                        "there is no model `{name}` in the chain of `{}` ({})",
                        model.name,
                        order.iter().map(|l| l.name).collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        let mut configs_by_type = HashMap::new();
        let mut states = Vec::new();
        for layer in &order {
            if let Some(config) = &layer.config {
                let loaded =
                    (config.load)(configs.get(layer.name)).map_err(|err| ProxyError::Config {
                        model: layer.name.to_owned(),
                        field: err.field,
                        message: err.message,
                    })?;
                configs_by_type.insert((config.type_id)(), loaded);
            } else if configs.get(layer.name).is_some_and(|v| !is_empty(v)) {
                return Err(ProxyError::Config {
                    model: layer.name.to_owned(),
                    field: None,
                    message: "this model takes no configuration".to_owned(),
                });
            }
            if let Some(state) = layer.state {
                states.push(state);
            }
        }
        let steps = HookId::ALL
            .iter()
            .map(|hook| steps_for(model, &order, *hook))
            .collect();
        Ok(Self {
            model: Some(model),
            observed: order.iter().any(|layer| !layer.observers.is_empty()),
            order,
            steps,
            configs: configs_by_type,
            states,
            router: None,
            live_router: None,
        })
    }

    /// The model the chain was built from.
    pub fn model(&self) -> Option<&'static ModelDescriptor> {
        self.model
    }

    /// The names of the layers, outermost first.
    pub fn layer_names(&self) -> Vec<&'static str> {
        self.order.iter().map(|layer| layer.name).collect()
    }

    /// The steps that run for `hook`, outermost first.
    pub fn steps(&self, hook: HookId) -> &[Step] {
        &self.steps[hook as usize]
    }

    /// Whether any model handles `hook`.
    pub fn has(&self, hook: HookId) -> bool {
        !self.steps[hook as usize].is_empty()
    }

    /// Whether a client request for `method` must go through the chain.
    pub fn intercepts_request(&self, method: &str) -> bool {
        self.has(HookId::Request) || HookId::for_method(method).is_some_and(|hook| self.has(hook))
    }

    /// Whether any model observes requests.
    pub fn observed(&self) -> bool {
        self.observed
    }

    /// Applies routing paths (hidden, pass-through) in front of the chain; `upstream` tells
    /// how names are namespaced.
    pub(crate) fn with_routes(mut self, routes: &Routes, upstream: &Upstream) -> Self {
        self.router = Router::new(routes, upstream).map(Arc::new);
        self
    }

    /// Reads the routes from `slot` from now on (live changes, `crate::live`).
    pub(crate) fn follow_routes(mut self, slot: RouterSlot) -> Self {
        self.live_router = Some(slot);
        self
    }

    /// The routing paths, when any are configured.
    pub(crate) fn router(&self) -> Option<Arc<Router>> {
        match &self.live_router {
            Some(slot) => match slot.read() {
                Ok(router) => router.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            },
            None => self.router.clone(),
        }
    }

    pub(crate) fn layers(&self) -> &[&'static ModelDescriptor] {
        &self.order
    }

    pub(crate) fn config(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        self.configs.get(&type_id).map(|config| &**config)
    }

    pub(crate) fn state_types(&self) -> &[StateDescriptor] {
        &self.states
    }
}

impl SessionChain for Chain {
    fn config(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        Chain::config(self, type_id)
    }

    fn state_types(&self) -> &[StateDescriptor] {
        Chain::state_types(self)
    }

    fn check_upstream_request(
        &self,
        method: &str,
        params: Option<String>,
        who: &Identity,
    ) -> HookResult<Option<String>> {
        Chain::check_upstream_request(self, method, params, who)
    }

    fn filter_upstream_answer(
        &self,
        method: &str,
        raw: String,
        who: &Identity,
    ) -> HookResult<(String, Option<Vec<Value>>)> {
        Chain::filter_upstream_answer(self, method, raw, who)
    }

    fn below(&self) -> &dyn BelowChain {
        self
    }

    fn routes_version(&self) -> u64 {
        self.router().map_or(0, |router| router.version())
    }
}

/// The models of `model`'s composition, outermost first, each once.
pub fn layers_of(model: &'static ModelDescriptor) -> Vec<&'static ModelDescriptor> {
    let mut order = Vec::new();
    flatten(model, &mut order);
    order
}

/// For every hook some model in `model`'s composition handles, the models whose step runs, in
/// order (synthetic tools and content transforms included, as `name (tools)` and
/// `name (transform_content)`). What `mcpctl describe proxymodel` shows.
pub fn hook_plan(model: &'static ModelDescriptor) -> Vec<(HookId, Vec<String>)> {
    let order = layers_of(model);
    HookId::ALL
        .iter()
        .filter_map(|hook| {
            let steps = steps_for(model, &order, *hook);
            if steps.is_empty() {
                return None;
            }
            let names = steps
                .iter()
                .map(|step| {
                    let name = step.model;
                    match step.kind {
                        StepKind::Hook => name.to_owned(),
                        StepKind::Tools(_) => format!("{name} (tools)"),
                        StepKind::Transform => format!("{name} (transform_content)"),
                    }
                })
                .collect();
            Some((*hook, names))
        })
        .collect()
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Depth-first, parents in `extends` order, each model once at its first place.
fn flatten(model: &'static ModelDescriptor, out: &mut Vec<&'static ModelDescriptor>) {
    if out.iter().any(|seen| seen.same(model)) {
        return;
    }
    out.push(model);
    for parent in model.parents {
        flatten(parent, out);
    }
}

/// The models whose own implementation of `hook` runs in `model`'s composition.
fn implementers(model: &'static ModelDescriptor, hook: HookId, out: &mut Vec<&'static str>) {
    let own = model.hooks.contains(hook);
    if own {
        out.push(model.defined_at);
        let mut answering: Vec<&str> = model
            .parents
            .iter()
            .filter_map(|parent| parent.owners[hook as usize])
            .collect();
        answering.dedup();
        answering.sort_unstable();
        answering.dedup();
        if answering.len() >= 2 && !model.chained.contains(hook) {
            // The model resolved a conflict by implementing the hook: it replaces its parents'.
            return;
        }
    }
    for parent in model.parents {
        implementers(parent, hook, out);
    }
}

fn steps_for(
    model: &'static ModelDescriptor,
    order: &[&'static ModelDescriptor],
    hook: HookId,
) -> Vec<Step> {
    let mut running = Vec::new();
    implementers(model, hook, &mut running);
    let mut transforming = Vec::new();
    let transforms = matches!(
        hook,
        HookId::ToolCall | HookId::ResourceRead | HookId::PromptGet
    );
    if transforms {
        implementers(model, HookId::TransformContent, &mut transforming);
    }
    let mut steps = Vec::new();
    for layer in order {
        if running.contains(&layer.defined_at) {
            steps.push(Step {
                layer: layer.layer,
                model: layer.name,
                kind: StepKind::Hook,
            });
        }
        if matches!(hook, HookId::ToolsList | HookId::ToolCall) && !layer.tools.is_empty() {
            steps.push(Step {
                layer: layer.layer,
                model: layer.name,
                kind: StepKind::Tools(layer.tools),
            });
        }
        if transforms && transforming.contains(&layer.defined_at) {
            steps.push(Step {
                layer: layer.layer,
                model: layer.name,
                kind: StepKind::Transform,
            });
        }
    }
    steps
}
