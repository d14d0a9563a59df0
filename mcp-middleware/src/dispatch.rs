//! Running one message through the chain: the task side of a hooked request, notification or
//! server request, and the ends of each chain (the upstream, or the client).
//!
//! The session loop (`session`) decides *whether* a message needs the chain; everything here
//! runs in a task of its own, so a hook can await the upstream while the loop goes on relaying.
//! A typed hook's params are parsed from the client's JSON only here, and its result written
//! back to JSON only here; a message no hook handles never comes this way.

mod listing;

use std::any::Any;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use rmcp::model::{ErrorCode, ErrorData, ListToolsResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::chain::Chain;
use crate::context::{Context, LoopCall, RawOutcome, from_result, to_params};
use crate::jsonrpc;
use crate::model::hooks::{self, RequestHook, parse_params};
use crate::model::{BoxFuture, End, HookId, HookResult, Next, RawNotification, RawRequest, Step};
use crate::unknown_fields::UnknownFields;
use listing::Listing;

/// The size below which no result is a kept listing: shorter answers need not be looked at.
pub(crate) use listing::KEEP_FROM_BYTES as KEPT_LISTING_BYTES;

/// Whether `text` is exactly a `tools/list` result the proxy keeps (read whole before, so one
/// valid JSON value): the upstream's reader then takes its answer without scanning it
/// ([`crate::jsonrpc::known_result`]).
pub(crate) fn is_kept_listing(text: &str) -> bool {
    listing::is_kept(text)
}

/// A client request through the chain: `on_request` hooks first, then the typed hooks of its
/// method, then the upstream. Returns the result's JSON text.
pub(crate) async fn client_request(
    chain: &Chain,
    ctx: &Context,
    method: String,
    params: Option<String>,
) -> RawOutcome {
    if chain.has(HookId::Request) {
        let params = match params.as_deref().map(serde_json::from_str::<Value>) {
            None => None,
            Some(Ok(params)) => Some(params),
            Some(Err(err)) => return Err(invalid_params(&method, &err)),
        };
        let end = TypedEnd { chain };
        let next = Next::<hooks::Request>::new(chain.steps(HookId::Request), &end);
        let result = next.run(ctx, RawRequest { method, params }).await?;
        return write(&result);
    }
    typed(chain, ctx, &method, params).await
}

/// The typed hooks of `method`, if any model has them, else the upstream.
async fn typed(chain: &Chain, ctx: &Context, method: &str, params: Option<String>) -> RawOutcome {
    let Some(hook) = HookId::for_method(method).filter(|hook| chain.has(*hook)) else {
        return ctx.upstream_raw(method, params).await;
    };
    match run_typed(hook, chain, ctx, params.as_deref()).await {
        Some(outcome) => outcome,
        None => ctx.upstream_raw(method, params).await,
    }
}

/// `run::<H>` for the typed request hook `hook`, from the hook table (`None`: not a typed hook).
macro_rules! run_typed {
    (
        typed { $( $(#[$tdoc:meta])* $tid:ident, $tfn:ident, $method:literal: $tp:ty => $to:ty; )* }
        $($rest:tt)*
    ) => {
        async fn run_typed(
            hook: HookId,
            chain: &Chain,
            ctx: &Context,
            params: Option<&str>,
        ) -> Option<RawOutcome> {
            Some(match hook {
                $(HookId::$tid => run::<hooks::$tid>(chain, ctx, params).await,)*
                _ => return None,
            })
        }
    };
}

crate::model::hook_table::for_each_hook!(run_typed);

async fn run<H>(chain: &Chain, ctx: &Context, params: Option<&str>) -> RawOutcome
where
    H: RequestHook,
    H::Params: Serialize + DeserializeOwned,
    H::Output: Serialize + DeserializeOwned,
{
    run_steps::<H>(chain.steps(H::ID), ctx, params).await
}

/// A typed request through `steps` (a whole chain's, or the part below one layer: see
/// `crate::below`), then the upstream.
///
/// The request and its result cross every hook as one typed value: the params are read from the
/// client's text here and written for the upstream at the end of the chain; the upstream's result
/// is read there and written here, for the client. A `tools/list` result is read through
/// [`Listing`], which does not parse schemas it has seen before and writes unchanged ones as the
/// upstream's own text. Other results are written straight to text unless members rmcp's types
/// lost must be put back.
pub(crate) async fn run_steps<H>(steps: &[Step], ctx: &Context, params: Option<&str>) -> RawOutcome
where
    H: RequestHook,
    H::Params: Serialize + DeserializeOwned,
    H::Output: Serialize + DeserializeOwned,
{
    let (typed, params_lost) = read_params::<H>(params)?;
    let end = UpstreamEnd::<H> {
        params_lost,
        result: Mutex::new(None),
        hook: PhantomData,
    };
    let mut output = Next::<H>::new(steps, &end).run(ctx, typed).await?;
    let read = end.result.lock().ok().and_then(|mut read| read.take());
    // rmcp's constructors mark results `resultType: complete`, a 2026-07-28 field; a client
    // that negotiated an older version gets what its server would have sent.
    let older = ctx
        .protocol_version()
        .is_some_and(|version| version.as_str() < "2026-07-28");
    let lost = match &read {
        Some(Read::Listing(listing)) => {
            if let Some(list) = (&mut output as &mut dyn Any).downcast_mut::<ListToolsResult>() {
                if older {
                    list.result_type = None;
                }
                return listing
                    .write(list)
                    .map_err(|err| unwritable(H::METHOD, &err));
            }
            listing.lost()
        }
        Some(Read::Lost(lost)) => Some(lost),
        None => None,
    };
    if lost.is_none() {
        let text = serde_json::to_string(&output).map_err(|err| unwritable(H::METHOD, &err))?;
        // The member can only be spelled so as a key or a whole string: this rarely misses.
        if !(older && text.contains("\"resultType\"")) {
            return Ok(text);
        }
    }
    let mut value = serde_json::to_value(&output).map_err(|err| unwritable(H::METHOD, &err))?;
    if let Some(lost) = lost {
        lost.restore(&mut value);
    }
    if older && let Value::Object(map) = &mut value {
        map.remove("resultType");
    }
    write(&value)
}

/// Reads a typed hook's params from the client's text, and what rmcp's type lost of them.
fn read_params<H>(params: Option<&str>) -> HookResult<(H::Params, Option<UnknownFields>)>
where
    H: RequestHook,
    H::Params: Serialize + DeserializeOwned,
    H::Output: Serialize + DeserializeOwned,
{
    // Read from the text, not from a `Value`: the typed read refuses duplicate members, which a
    // `Value` would silently collapse.
    let typed: H::Params = parse_params(params).map_err(|err| invalid_params(H::METHOD, &err))?;
    let lost = params.and_then(|raw| lost_in(raw, &typed));
    Ok((typed, lost))
}

/// Reads an upstream's result into `T`, and what `T` lost of it.
fn read_result<T: Serialize + DeserializeOwned>(
    method: &str,
    raw: &str,
) -> HookResult<(T, Option<UnknownFields>)> {
    let typed: T = from_result(method, raw)?;
    let lost = lost_in(raw, &typed);
    Ok((typed, lost))
}

fn write<T: Serialize>(value: &T) -> RawOutcome {
    serde_json::to_string(value).map_err(|err| unwritable("result", &err))
}

fn invalid_params(method: &str, err: &serde_json::Error) -> ErrorData {
    ErrorData::new(
        ErrorCode(jsonrpc::INVALID_PARAMS as i32),
        format!("Invalid params for `{method}`: {err}"),
        None,
    )
}

fn unwritable(what: &str, err: &serde_json::Error) -> ErrorData {
    ErrorData::internal_error(format!("the proxy could not write the {what}: {err}"), None)
}

/// Up to this many bytes, [`lost_in`] first checks whether the typed value writes the text back.
const SAME_TEXT_BELOW: usize = 4 * 1024;

/// What reading `raw` into `typed` lost (see [`UnknownFields`]): the text is not read into a
/// `Value` again, only the members that can be lost are ([`UnknownFields::lost_in_text`]).
fn lost_in<T: Serialize>(raw: &str, typed: &T) -> Option<UnknownFields> {
    // Only an object can carry members a type has no field for.
    if !raw.trim_start().starts_with('{') {
        return None;
    }
    // A typed value that writes back the very text it was read from lost nothing. Checked
    // first for small messages (an echo's params and result): writing the text costs a
    // fraction of finding what was lost; on a large one a miss would cost a whole write.
    if raw.len() <= SAME_TEXT_BELOW && serde_json::to_string(typed).is_ok_and(|text| text == raw) {
        return None;
    }
    let typed = serde_json::to_value(typed).ok()?;
    UnknownFields::lost_in_text(raw, &typed)
}

/// What the end of a typed chain read of the upstream's result, for [`run_steps`] to write the
/// hooks' result with.
enum Read {
    /// A `tools/list` result: written with the upstream's own text for unchanged schemas.
    Listing(Arc<Listing>),
    /// What the typed result lost of the upstream's answer, to put back.
    Lost(UnknownFields),
}

/// The end of a typed chain: the upstream. It puts back into the request the members the
/// client sent that the typed params lost, and keeps what it read of the upstream's answer
/// ([`Read`]) for [`run_steps`].
struct UpstreamEnd<H> {
    params_lost: Option<UnknownFields>,
    result: Mutex<Option<Read>>,
    hook: PhantomData<fn() -> H>,
}

impl<H> End<H> for UpstreamEnd<H>
where
    H: RequestHook,
    H::Params: Serialize + DeserializeOwned,
    H::Output: Serialize + DeserializeOwned,
{
    fn run<'a>(
        &'a self,
        ctx: &'a Context,
        params: H::Params,
    ) -> BoxFuture<'a, HookResult<H::Output>> {
        Box::pin(async move {
            let params = match &self.params_lost {
                None => to_params(&params)?,
                Some(lost) => {
                    let mut value = serde_json::to_value(&params)
                        .map_err(|err| unwritable("request params", &err))?;
                    lost.restore(&mut value);
                    to_params(&value)?
                }
            };
            let raw = ctx.upstream_raw(H::METHOD, params).await?;
            let (typed, read) = if H::ID == HookId::ToolsList {
                let listing = Listing::read(raw)?;
                let mut typed: Option<H::Output> = None;
                if let Some(slot) =
                    (&mut typed as &mut dyn Any).downcast_mut::<Option<ListToolsResult>>()
                {
                    *slot = Some(listing.typed());
                }
                match typed {
                    Some(typed) => (typed, Some(Read::Listing(listing))),
                    None => {
                        return Err(ErrorData::internal_error(
                            "the proxy's tools/list hook does not return a tools/list result",
                            None,
                        ));
                    }
                }
            } else {
                let (typed, lost) = read_result::<H::Output>(H::METHOD, &raw)?;
                (typed, lost.map(Read::Lost))
            };
            if let Ok(mut slot) = self.result.lock() {
                *slot = read;
            }
            Ok(typed)
        })
    }
}

/// The end of the `on_request` chain: the method's typed hooks, then the upstream.
struct TypedEnd<'c> {
    chain: &'c Chain,
}

impl End<hooks::Request> for TypedEnd<'_> {
    fn run<'a>(
        &'a self,
        ctx: &'a Context,
        request: RawRequest,
    ) -> BoxFuture<'a, HookResult<Value>> {
        Box::pin(async move {
            let params = match &request.params {
                Some(params) => to_params(params)?,
                None => None,
            };
            let raw = typed(self.chain, ctx, &request.method, params).await?;
            from_result(&request.method, &raw)
        })
    }
}

/// Where a notification goes once it is through the hooks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Toward {
    /// A client's notification: back to the loop, which relays it upstream (mapping ids).
    Upstream,
    /// An upstream's notification, already in the client's terms: to the client.
    Client,
}

/// A notification through `on_client_notification` or `on_server_notification` hooks, by where
/// it is going; what comes out is delivered there.
pub(crate) async fn notification(
    chain: &Chain,
    ctx: &Context,
    notification: RawNotification,
    toward: Toward,
) -> HookResult<()> {
    let end = NotificationEnd(toward);
    match toward {
        Toward::Upstream => {
            Next::<hooks::ClientNotification>::new(chain.steps(HookId::ClientNotification), &end)
                .run(ctx, notification)
                .await
        }
        Toward::Client => {
            Next::<hooks::ServerNotification>::new(chain.steps(HookId::ServerNotification), &end)
                .run(ctx, notification)
                .await
        }
    }
}

/// The end of a notification chain: delivery.
struct NotificationEnd(Toward);

impl NotificationEnd {
    fn deliver(&self, ctx: &Context, notification: &RawNotification) -> HookResult<()> {
        let line = notification_line(notification)?;
        let link = &ctx.scope().link;
        // A closed channel means the session is ending: there is no one left to tell.
        match self.0 {
            Toward::Upstream => {
                let _ = link.calls.send(LoopCall::ClientNotification { line });
            }
            Toward::Client => {
                let _ = link.to_client.send(line);
            }
        }
        Ok(())
    }
}

impl End<hooks::ClientNotification> for NotificationEnd {
    fn run<'a>(
        &'a self,
        ctx: &'a Context,
        notification: RawNotification,
    ) -> BoxFuture<'a, HookResult<()>> {
        Box::pin(async move { self.deliver(ctx, &notification) })
    }
}

impl End<hooks::ServerNotification> for NotificationEnd {
    fn run<'a>(
        &'a self,
        ctx: &'a Context,
        notification: RawNotification,
    ) -> BoxFuture<'a, HookResult<()>> {
        Box::pin(async move { self.deliver(ctx, &notification) })
    }
}

fn notification_line(notification: &RawNotification) -> HookResult<String> {
    let params = match &notification.params {
        Some(params) => to_params(params)?,
        None => None,
    };
    Ok(jsonrpc::notification(
        &notification.method,
        params.as_deref(),
    ))
}

/// A request from the upstream through `on_server_request` hooks, then to the client.
pub(crate) async fn server_request(
    chain: &Chain,
    ctx: &Context,
    request: RawRequest,
) -> RawOutcome {
    let next = Next::<hooks::ServerRequest>::new(chain.steps(HookId::ServerRequest), &ClientEnd);
    let value = next.run(ctx, request).await?;
    write(&value)
}

struct ClientEnd;

impl End<hooks::ServerRequest> for ClientEnd {
    fn run<'a>(
        &'a self,
        ctx: &'a Context,
        request: RawRequest,
    ) -> BoxFuture<'a, HookResult<Value>> {
        Box::pin(async move {
            let params = match &request.params {
                Some(params) => to_params(params)?,
                None => None,
            };
            let raw = ctx.client_raw(&request.method, params).await?;
            from_result(&request.method, &raw)
        })
    }
}

/// Runs every layer's `on_session_start` (or `on_session_end`), outermost first; errors are
/// logged, since there is no request to fail.
pub(crate) async fn session_hooks(chain: &Chain, ctx: &Context, hook: HookId) {
    for step in chain.steps(hook) {
        let outcome = match hook {
            HookId::SessionStart => step.layer.on_session_start(ctx).await,
            _ => step.layer.on_session_end(ctx).await,
        };
        if let Err(err) = outcome {
            tracing::warn!(hook = hook.name(), error = %err.message, "a session hook failed");
        }
    }
}

/// Reads an error the upstream or client sent (raw JSON) into [`ErrorData`].
pub(crate) fn error_data(raw: &str) -> ErrorData {
    serde_json::from_str(raw).unwrap_or_else(|_| {
        ErrorData::internal_error(format!("the peer sent an unreadable error: {raw}"), None)
    })
}

/// Tells whether a `tools/call` result reports a tool error.
pub(crate) fn is_tool_error(raw: &str) -> bool {
    raw.contains("\"isError\"")
        && serde_json::from_str::<Value>(raw)
            .ok()
            .and_then(|v| v.get("isError").and_then(Value::as_bool))
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hooks::ToolCall;

    #[test]
    fn a_hooks_params_with_a_known_member_twice_are_refused() {
        let refused = read_params::<ToolCall>(Some(
            r#"{"name":"plain","arguments":{},"name":"admin-reset"}"#,
        ));
        let err = refused.expect_err("refused");
        assert!(
            err.message.contains("duplicate field `name`"),
            "{}",
            err.message
        );
        // An unknown member twice is read as a `Value` reads it: the last one is put back.
        let (typed, lost) =
            read_params::<ToolCall>(Some(r#"{"name":"a","x":1,"x":2}"#)).expect("read");
        assert_eq!(typed.name, "a");
        assert_eq!(lost.expect("lost").top()["x"], 2);
    }

    #[test]
    fn a_small_message_its_type_writes_back_as_it_came_lost_nothing_and_one_it_does_not_is_compared()
     {
        let params = r#"{"name":"echo","arguments":{"text":"hello"}}"#;
        let result = r#"{"content":[{"type":"text","text":"hello"}]}"#;
        // The shapes of an echo: the typed values write them back exactly (the cheap check).
        let (typed, lost) = read_params::<ToolCall>(Some(params)).expect("read");
        assert_eq!(serde_json::to_string(&typed).expect("text"), params);
        assert!(lost.is_none());
        let (typed, lost) =
            read_result::<rmcp::model::CallToolResult>("tools/call", result).expect("read");
        assert_eq!(serde_json::to_string(&typed).expect("text"), result);
        assert!(lost.is_none());
        // Spelled otherwise, with nothing lost: still nothing.
        let spaced = r#"{ "arguments": {"text": "hello"}, "name": "echo" }"#;
        assert!(
            read_params::<ToolCall>(Some(spaced))
                .expect("read")
                .1
                .is_none()
        );
        // A member the type does not know is found, as before.
        let extra = r#"{"name":"echo","arguments":{"text":"hello"},"x-extra":1}"#;
        let lost = read_params::<ToolCall>(Some(extra)).expect("read").1;
        assert_eq!(lost.expect("lost").top()["x-extra"], 1);
    }

    #[test]
    fn unknown_members_of_a_result_at_the_top_and_in_content_items_are_put_back() {
        let raw = serde_json::json!({
            "content": [
                {"type": "text", "text": "a", "x-item": {"deep": [1, 2.5, "\u{e9}"]}},
                {"type": "image", "data": "AA==", "mimeType": "image/png", "x-other": null},
                {"type": "text", "text": "c"},
            ],
            "isError": false,
            "x-top": {"kept": true},
        })
        .to_string();
        let (typed, lost) =
            read_result::<rmcp::model::CallToolResult>("tools/call", &raw).expect("read");
        let mut written = serde_json::to_value(&typed).expect("value");
        lost.expect("lost").restore(&mut written);
        let raw: Value = serde_json::from_str(&raw).expect("json");
        // Every member the upstream sent is in what is written, with its value.
        for (key, value) in raw.as_object().expect("object") {
            if key != "content" {
                assert_eq!(&written[key], value, "{key}");
            }
        }
        for (at, item) in raw["content"].as_array().expect("items").iter().enumerate() {
            for (key, value) in item.as_object().expect("item") {
                assert_eq!(&written["content"][at][key], value, "content[{at}].{key}");
            }
        }
        assert!(written["content"][1].get("x-other").is_some());
    }
}
