use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    pub fn on_session_start(_ctx: &Context) -> HookResult<()> {
        Ok(())
    }
}

// After the error, `focused` still is a model: extending it and naming it add no errors.
#[proxy_model(extends = [focused])]
pub mod child {}

fn main() {
    assert_eq!(<focused::Model as ProxyModel>::DESCRIPTOR.name, "focused");
    let _ = <child::Model as ProxyModel>::DESCRIPTOR;
}
