//! Tools and observers may have any name, even those of the generated code's locals.

use mcp_middleware::prelude::*;

#[proxy_model]
pub mod names {
    use mcp_middleware::prelude::*;

    #[derive(Deserialize, JsonSchema)]
    pub struct Args {
        pub name: String,
    }

    #[tool]
    pub async fn arguments(_ctx: &Context) -> HookResult<&'static str> {
        Ok("arguments")
    }

    #[tool]
    pub async fn output(_ctx: &Context, args: Args) -> HookResult<String> {
        Ok(args.name)
    }

    #[tool]
    pub async fn result(_ctx: &Context, arguments: Args) -> HookResult<String> {
        Ok(arguments.name)
    }

    #[tool]
    pub async fn name(ctx: &Context) -> HookResult<String> {
        Ok(ctx.session_id().to_owned())
    }

    #[observer]
    pub fn observation(_ctx: &Context, _observation: &Observation) {}

    #[observer]
    pub fn ctx(_ctx: &Context, _observation: &Observation) {}
}

fn main() {
    let model = <names::Model as ProxyModel>::DESCRIPTOR;
    let tools: Vec<_> = model.tools.iter().map(|tool| tool.name).collect();
    assert_eq!(tools, ["arguments", "output", "result", "name"]);
    assert_eq!(model.observers, ["observation", "ctx"]);
}
