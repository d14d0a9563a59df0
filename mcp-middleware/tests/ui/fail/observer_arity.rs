use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    #[observer]
    pub fn record(observation: &Observation) {
        let _ = observation;
    }
}

fn main() {}
