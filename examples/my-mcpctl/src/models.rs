//! This crate's models. `focused`: the stock `gate` and `paginate`, plus a tool that says what the session
//! was opened for.

use mcp_middleware::prelude::*;
use mcp_middleware_models::{gate, paginate};

/// Gates each session until `begin_session`, pages large results, and can recall the intent.
///
/// The stock `gate` and `paginate` do the work; `session_intent` answers with the intent the
/// session was opened with, so a long conversation can find its way back to it.
#[proxy_model(extends = [gate, paginate])]
pub mod focused {
    use mcp_middleware_models::gate;

    /// The intent given to `begin_session`, or a note that the session is not open yet.
    #[tool]
    pub async fn session_intent(ctx: &Context) -> HookResult<String> {
        let intent = ctx.state(|state: &mut gate::State| state.intent.clone())?;
        Ok(intent.unwrap_or_else(|| "the session is not open yet: call begin_session".to_owned()))
    }
}
