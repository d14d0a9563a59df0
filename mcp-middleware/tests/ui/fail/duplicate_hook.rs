use mcp_middleware::prelude::*;

#[proxy_model]
pub mod focused {
    use mcp_middleware::prelude::*;

    pub async fn on_session_start(_ctx: &Context) -> HookResult<()> {
        Ok(())
    }

    pub async fn on_session_start(_ctx: &Context) -> HookResult<()> {
        Ok(())
    }
}

fn main() {}
