//! Observers never conflict: both parents observe, and the child extends both.

use mcp_middleware::prelude::*;

#[proxy_model]
pub mod audit {
    use mcp_middleware::prelude::*;

    #[observer]
    pub fn record(_ctx: &Context, observation: &Observation) {
        let _ = &observation.method;
    }
}

#[proxy_model]
pub mod telemetry {
    use mcp_middleware::prelude::*;

    #[observer]
    pub fn record(_ctx: &Context, _observation: &Observation) {}

    #[observer]
    pub fn time(_ctx: &Context, observation: &Observation) {
        let _ = observation.duration;
    }
}

#[proxy_model(extends = [audit, telemetry])]
pub mod both {}

fn main() {
    let model = <both::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.parents[0].observers, ["record"]);
    assert_eq!(model.parents[1].observers, ["record", "time"]);
    assert!(model.observers.is_empty());
}
