use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    // A `Config` needs a JSON schema (`mcpctl describe` shows it) as well as `Deserialize`.
    #[derive(Deserialize, Default)]
    pub struct Config {
        pub level: u8,
    }
}

fn main() {}
