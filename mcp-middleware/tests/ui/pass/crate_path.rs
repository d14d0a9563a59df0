//! `crate = path` for a crate that reaches `mcp_middleware` through a re-export; serde and
//! schemars derives in the model go through it too.

pub mod reexport {
    pub use mcp_middleware as mm;
}

#[crate::reexport::mm::proxy_model(crate = crate::reexport::mm)]
pub mod quiet {
    use crate::reexport::mm::prelude::*;

    #[derive(Deserialize, JsonSchema, Default)]
    #[serde(default)]
    pub struct Config {
        pub level: u8,
    }

    #[derive(Deserialize, Serialize, JsonSchema)]
    pub struct Args {
        pub text: String,
    }

    #[tool]
    pub async fn say(_ctx: &Context, args: Args) -> HookResult<String> {
        Ok(args.text)
    }
}

fn main() {
    use mcp_middleware::ProxyModel;
    let model = <quiet::Model as ProxyModel>::DESCRIPTOR;
    assert_eq!(model.name, "quiet");
    assert!(model.config.is_some());
    assert_eq!(model.tools[0].name, "say");
}
