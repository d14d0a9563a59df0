use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    // A tool's arguments need a JSON schema (the tool's input schema) as well as `Deserialize`.
    #[derive(Deserialize)]
    pub struct Args {
        pub text: String,
    }

    #[tool]
    pub async fn echo(_ctx: &Context, args: Args) -> HookResult<String> {
        Ok(args.text)
    }
}

fn main() {}
