//! The chain's upstream end: a handle through which a hook task (`next.run()`,
//! `ctx.upstream()`) writes its request to the upstream itself and gets the answer back, without
//! a round trip through the session loop.
//!
//! The handle shares two things with the loop: the queue to the upstream's writer, present only
//! while the session is in a state where a hook's request needs nothing of the loop (the
//! upstream is up, no handshake is being replayed, the client's era is settled and not bridged),
//! and the requests sent that way, by upstream id. The answer comes back the same way: the
//! upstream's reader hands it to its waiter here ([`AnswerTap`], through the connection's
//! [`Outlet`](crate::upstream::Outlet)) once the loop has handled whatever the upstream sent
//! before it, and gives it to the loop otherwise, which then finds the waiter here
//! ([`UpstreamEnd::take`]). The loop still resets a waiter's deadline on progress, times
//! waiters out and fails them when the upstream dies. When the writer is absent (a restart, a
//! probe, a bridged client, a backlog) or the method changes what a restart must replay,
//! [`UpstreamEnd::send`] declines and the request goes through the loop as before.
//!
//! The path of a hooked `tools/call` on stdio, counted in task or channel crossings (the
//! era adapter between a connection and its session, `upstream/reverse_bridge`, not counted):
//! - first: client reader -> loop -> hook task -> `LoopCall::Upstream` -> loop -> upstream
//!   writer ... upstream reader -> loop -> oneshot -> task -> `LoopCall::Finished` -> loop ->
//!   client writer (8, of which 4 per `next`);
//! - then the task wrote to the upstream writer's queue itself (7, of which 3 per `next`);
//! - now the upstream's reader also hands the answer to the task's oneshot itself, and the task
//!   writes its final answer to the client writer's queue itself (`client_end`): client reader
//!   -> loop -> hook task -> upstream writer ... upstream reader -> oneshot -> task -> client
//!   writer (5, of which 2 per `next`; on HTTP the front's request task adds one: 6, from 8);
//! - now the task's first step runs on the loop's thread, up to its upstream write
//!   (`first_step`), and the task is spawned by the reader that wakes it: the same crossings,
//!   but neither the spawn nor the answer wakes the loop (which forgets the call when it next
//!   runs, `Hooked::forget_answered`), so on HTTP a hooked echo no longer hands off between
//!   workers twice (5.3 -> 3.5 context switches per echo).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::exchange::{IdMap, IdSource, Waiting, swap_progress_token_in};

use crate::context::RawOutcome;
use crate::jsonrpc::{self, Message};
use crate::transport::queue::LineQueue;
use crate::upstream::AnswerTap;

/// A request a hook wrote to the upstream itself, waiting for its answer.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// The hooked client request it serves (0: none).
    pub(crate) call: u64,
    pub(crate) method: Box<str>,
    /// The token the hook sent, as raw JSON, when it asked for progress.
    pub(crate) progress_token: Option<Box<str>>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) reply: oneshot::Sender<RawOutcome>,
}

impl Waiting for Waiter {
    fn progress_token(&self) -> Option<&str> {
        self.progress_token.as_deref()
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }
}

#[derive(Debug, Default)]
struct Shared {
    /// The upstream's input, while hooks may write to it directly.
    writer: Option<LineQueue>,
    /// Numbered from the session's ids ([`UpstreamEnd::ids`]).
    waiting: IdMap<Waiter>,
}

/// The handle hook tasks and the session loop share (cloning it shares it).
#[derive(Debug, Clone)]
pub(crate) struct UpstreamEnd {
    shared: Arc<Mutex<Shared>>,
    /// The session's upstream ids: the loop and hook tasks number their requests from here.
    ids: IdSource,
    request_timeout: Option<Duration>,
    /// Past this many bytes waiting for the upstream, requests go through the loop (which
    /// refuses them with the backlog error).
    backlog_limit: usize,
    /// Every request goes through the loop: set when a request tap is installed, since the
    /// loop is where the tap adds its `_meta` (trace context) to what is forwarded.
    through_loop: bool,
}

/// Methods whose requests the loop must see: it remembers them for a restart's replay.
fn loop_only(method: &str) -> bool {
    matches!(
        method,
        "initialize" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe"
    )
}

impl UpstreamEnd {
    pub(crate) fn new(request_timeout: Option<Duration>, backlog_limit: usize) -> Self {
        let ids = IdSource::default();
        Self {
            shared: Arc::new(Mutex::new(Shared {
                writer: None,
                waiting: IdMap::new(ids.clone()),
            })),
            ids,
            request_timeout,
            backlog_limit,
            through_loop: false,
        }
    }

    /// Sends every request through the loop when `yes` (see the field's docs).
    pub(crate) fn through_loop(mut self, yes: bool) -> Self {
        self.through_loop = yes;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // Nothing panics while holding the lock; a poisoned one still holds consistent maps.
        match self.shared.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The session's upstream ids, for the session's own map of requests.
    pub(crate) fn ids(&self) -> &IdSource {
        &self.ids
    }

    /// Lets hooks write to `writer` directly (`Some`), or makes them go through the loop.
    /// Taking the writer away returns the requests still waiting, for the loop to fail.
    pub(crate) fn set_writer(&self, writer: Option<LineQueue>) -> Vec<(u64, Waiter)> {
        let mut shared = self.lock();
        let closing = writer.is_none();
        shared.writer = writer;
        if !closing {
            return Vec::new();
        }
        shared.waiting.drain()
    }

    /// Writes a request upstream for hooked call `call` and returns its id and the answer to
    /// come, or gives `params` back when the request must go through the loop.
    pub(crate) fn send(
        &self,
        call: u64,
        method: &str,
        params: Option<String>,
    ) -> Result<(u64, oneshot::Receiver<RawOutcome>), Option<String>> {
        if self.through_loop || loop_only(method) {
            return Err(params);
        }
        let mut shared = self.lock();
        let Some(writer) = &shared.writer else {
            return Err(params);
        };
        if writer.gauge().queued() > self.backlog_limit {
            return Err(params);
        }
        let uid = self.ids.next();
        // With a token, the client's params are kept until the line is queued: if the queue
        // is gone, the loop gets them as they were.
        let (sent, progress_token, original) = match params {
            Some(text) if text.contains("\"progressToken\"") => {
                match swap_progress_token_in(&text, uid) {
                    Some((rewritten, token)) => (Some(rewritten), token, Some(text)),
                    // Unreadable params: the loop sends them as they are.
                    None => return Err(Some(text)),
                }
            }
            params => (params, None, None),
        };
        let line = jsonrpc::request(itoa::Buffer::new().format(uid), method, sent.as_deref());
        if let Err(refused) = writer.send(line) {
            // The upstream's input is closed: the loop learns it and starts it again.
            drop(refused);
            return Err(original.or(sent));
        }
        let (reply, answer) = oneshot::channel();
        shared.waiting.insert(
            uid,
            Waiter {
                call,
                method: method.into(),
                progress_token,
                deadline: self.request_timeout.map(|t| Instant::now() + t),
                reply,
            },
        );
        Ok((uid, answer))
    }

    /// The answer to request `uid` is no longer awaited: it is cancelled upstream.
    pub(crate) fn cancel(&self, uid: u64, reason: &str) {
        let mut shared = self.lock();
        if shared.waiting.remove(uid).is_none() {
            return;
        }
        if let Some(writer) = &shared.writer {
            let params = serde_json::json!({ "requestId": uid, "reason": reason }).to_string();
            let _ = writer.send(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }

    /// Removes the waiter for upstream id `uid`, if a hook wrote that request.
    pub(crate) fn take(&self, uid: u64) -> Option<Waiter> {
        self.lock().waiting.remove(uid)
    }

    /// The hooked call upstream request `uid` serves, if a hook wrote it.
    pub(crate) fn call_of(&self, uid: u64) -> Option<u64> {
        self.lock().waiting.get(uid).map(|w| w.call)
    }

    /// Progress arrived for `uid`: its deadline starts again. Returns the hooked call it serves
    /// and the hook's progress token.
    pub(crate) fn touch(&self, uid: u64) -> Option<(u64, Option<Box<str>>)> {
        let mut shared = self.lock();
        let (_, waiter) = shared
            .waiting
            .progress(itoa::Buffer::new().format(uid), self.request_timeout)?;
        Some((waiter.call, waiter.progress_token.clone()))
    }

    /// Removes and returns the waiters whose deadline is past.
    pub(crate) fn expired(&self, now: Instant) -> Vec<(u64, Waiter)> {
        self.lock().waiting.expired(now)
    }

    /// Whether any request written this way still waits for its answer.
    pub(crate) fn any_waiting(&self) -> bool {
        !self.lock().waiting.is_empty()
    }
}

/// The upstream's reader hands the answers to requests written here straight to their hook
/// tasks ([`crate::upstream::Outlet`] says when it may).
impl AnswerTap for UpstreamEnd {
    fn take_answer(&self, line: String) -> Result<(), String> {
        if self.lock().waiting.is_empty() {
            return Err(line);
        }
        // The envelope is read outside the lock: an answer can be megabytes. A `tools/list`
        // result the proxy keeps (the same listing as before) is not crossed to find its end;
        // an answer too short to be one (an echo) is not scanned for it either.
        let known = (line.len() >= crate::dispatch::KEPT_LISTING_BYTES)
            .then(|| jsonrpc::known_result(&line, crate::dispatch::is_kept_listing))
            .flatten();
        let kept = known.is_some();
        let read = match known {
            Some((id, result)) => Ok(Message::Result { id, result }),
            None => Message::parse(&line),
        };
        let (uid, outcome) = match read {
            Ok(Message::Result { id, result }) => (id, Ok(jsonrpc::range_in(&line, result))),
            Ok(Message::Error {
                id: Some(id),
                error,
            }) => (id, Err(crate::dispatch::error_data(error))),
            _ => return Err(line),
        };
        let Some(waiter) = uid
            .parse::<u64>()
            .ok()
            .and_then(|uid| self.lock().waiting.remove(uid))
        else {
            return Err(line);
        };
        let _ = waiter
            .reply
            .send(outcome.map(|result| cut_out(line, result, kept)));
        Ok(())
    }
}

/// The text at `range` of `line` as its own `String`. A kept listing's keeps the line's buffer
/// (what precedes it moved out, once, within the buffer) instead of being copied onto fresh
/// pages: the steady `tools/list` this is for. Any other result is copied out as before (the
/// forwarding bench's 1 MiB result showed no gain from keeping its line).
fn cut_out(mut line: String, range: std::ops::Range<usize>, in_place: bool) -> String {
    if !in_place || line.get(range.clone()).is_none() {
        return line.get(range).unwrap_or_default().to_owned();
    }
    line.truncate(range.end);
    line.drain(..range.start);
    line
}

/// How a context writes to the upstream (`crate::context`, below the session, names the trait).
impl crate::context::DirectUpstream for UpstreamEnd {
    fn send(
        &self,
        call: u64,
        method: &str,
        params: Option<String>,
    ) -> Result<(u64, oneshot::Receiver<RawOutcome>), Option<String>> {
        UpstreamEnd::send(self, call, method, params)
    }

    fn ids(&self) -> &IdSource {
        UpstreamEnd::ids(self)
    }

    fn cancel(&self, uid: u64, reason: &str) {
        UpstreamEnd::cancel(self, uid, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end_with_writer() -> (
        UpstreamEnd,
        tokio::sync::mpsc::UnboundedReceiver<crate::transport::queue::Queued>,
    ) {
        let end = UpstreamEnd::new(Some(Duration::from_secs(30)), 1024);
        let (queue, rx) = LineQueue::new(1024);
        end.set_writer(Some(queue));
        (end, rx)
    }

    #[test]
    fn without_a_writer_the_request_goes_through_the_loop() {
        let end = UpstreamEnd::new(None, 1024);
        let declined = end.send(1, "tools/call", Some("{}".into()));
        assert_eq!(declined.unwrap_err().as_deref(), Some("{}"));
        assert!(!end.any_waiting());
    }

    #[test]
    fn a_request_is_written_with_a_fresh_id_and_its_answer_reaches_the_waiter() {
        let (end, mut rx) = end_with_writer();
        let (uid, mut answer) = end
            .send(7, "tools/call", Some(r#"{"name":"echo"}"#.into()))
            .unwrap();
        assert_eq!(uid, 1);
        let line = rx.try_recv().unwrap().into_line();
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#
        );
        let waiter = end.take(uid).unwrap();
        assert_eq!(waiter.call, 7);
        waiter.reply.send(Ok("{}".into())).unwrap();
        assert_eq!(answer.try_recv().unwrap().unwrap(), "{}");
        assert!(end.take(uid).is_none());
    }

    #[test]
    fn a_progress_token_becomes_the_upstream_id_and_is_kept_for_the_way_back() {
        let (end, mut rx) = end_with_writer();
        let params = r#"{"name":"x","_meta":{"progressToken":"tok"}}"#;
        let (uid, _answer) = end.send(1, "tools/call", Some(params.into())).unwrap();
        let line = rx.try_recv().unwrap().into_line();
        assert!(
            line.contains(&format!(r#""progressToken":{uid}"#)),
            "{line}"
        );
        let (call, token) = end.touch(uid).unwrap();
        assert_eq!((call, token.as_deref()), (1, Some("\"tok\"")));
    }

    #[test]
    fn methods_a_restart_replays_go_through_the_loop() {
        let (end, mut rx) = end_with_writer();
        for method in ["initialize", "logging/setLevel", "resources/subscribe"] {
            assert!(end.send(1, method, None).is_err(), "{method}");
        }
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_backlog_sends_the_request_through_the_loop() {
        let (end, _rx) = end_with_writer();
        let big = "x".repeat(2048);
        let first = end.send(1, "tools/call", Some(format!(r#"{{"a":"{big}"}}"#)));
        assert!(first.is_ok());
        assert!(end.send(1, "tools/call", None).is_err());
    }

    #[test]
    fn cancelling_writes_a_cancellation_and_forgets_the_waiter() {
        let (end, mut rx) = end_with_writer();
        let (uid, _answer) = end.send(1, "tools/call", None).unwrap();
        let _request = rx.try_recv().unwrap();
        end.cancel(uid, "gone");
        let line = rx.try_recv().unwrap().into_line();
        assert!(line.contains("notifications/cancelled"), "{line}");
        assert!(line.contains(&format!(r#""requestId":{uid}"#)), "{line}");
        assert!(!end.any_waiting());
        end.cancel(uid, "gone");
        assert!(rx.try_recv().is_err(), "a second cancel writes nothing");
    }

    #[test]
    fn taking_the_writer_away_hands_back_every_waiter_and_expiry_finds_late_ones() {
        let (end, _rx) = end_with_writer();
        let (a, _ra) = end.send(1, "tools/call", None).unwrap();
        let (b, _rb) = end.send(2, "tools/list", None).unwrap();
        let late = Instant::now() + Duration::from_secs(31);
        let expired: Vec<u64> = end.expired(late).into_iter().map(|(uid, _)| uid).collect();
        assert_eq!(expired.len(), 2);
        let (c, _rc) = end.send(3, "tools/call", None).unwrap();
        let failed: Vec<u64> = end
            .set_writer(None)
            .into_iter()
            .map(|(uid, _)| uid)
            .collect();
        assert_eq!(failed, vec![c]);
        assert!(a < b && b < c);
        assert!(end.send(4, "tools/call", None).is_err());
    }

    #[test]
    fn the_reader_hands_an_answer_to_its_waiter_and_gives_back_every_other_line() {
        let (end, _rx) = end_with_writer();
        let no_waiter = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_owned();
        assert_eq!(end.take_answer(no_waiter.clone()), Err(no_waiter));

        let (uid, mut answer) = end.send(1, "tools/call", None).unwrap();
        let (other, mut other_answer) = end.send(2, "tools/list", None).unwrap();
        for line in [
            // A request from the upstream may carry the same number.
            format!(r#"{{"jsonrpc":"2.0","id":{uid},"method":"sampling/createMessage"}}"#),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"x","result":{}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":999,"result":{}}"#.to_owned(),
            "not json".to_owned(),
        ] {
            assert_eq!(end.take_answer(line.clone()), Err(line));
        }
        assert!(answer.try_recv().is_err());

        // Members in any order (a TypeScript server writes the result first).
        let result = format!(r#"{{"result":{{"content":[]}},"jsonrpc":"2.0","id":{uid}}}"#);
        assert_eq!(end.take_answer(result), Ok(()));
        assert_eq!(answer.try_recv().unwrap().unwrap(), r#"{"content":[]}"#);

        let error = format!(
            r#"{{"jsonrpc":"2.0","id":{other},"error":{{"code":-32602,"message":"bad"}}}}"#
        );
        assert_eq!(end.take_answer(error), Ok(()));
        let error = other_answer.try_recv().unwrap().unwrap_err();
        assert_eq!((error.code.0, &*error.message), (-32602, "bad"));
        assert!(!end.any_waiting(), "both waiters are gone");
    }

    #[test]
    fn a_result_is_cut_out_of_its_line_exactly_wherever_it_stands() {
        let (end, _rx) = end_with_writer();
        let result = format!(
            r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
            "é".repeat(20_000)
        );
        for line in [
            |uid: u64, result: &str| format!(r#"{{"jsonrpc":"2.0","id":{uid},"result":{result}}}"#),
            |uid: u64, result: &str| format!(r#"{{"result":{result},"jsonrpc":"2.0","id":{uid}}}"#),
            |uid: u64, result: &str| {
                format!(r#" {{ "jsonrpc" : "2.0", "result" : {result} , "id" : {uid} }} "#)
            },
        ] {
            let (uid, mut answer) = end.send(1, "tools/call", None).unwrap();
            assert_eq!(end.take_answer(line(uid, &result)), Ok(()));
            assert_eq!(answer.try_recv().unwrap().unwrap(), result);
        }
        // Copied out or cut in place: the same text.
        for in_place in [false, true] {
            let small = r#"{"content":[]}"#;
            let line = format!(r#"{{"result":{small}}}"#);
            assert_eq!(cut_out(line, 10..24, in_place), small);
            let large = format!("{}x", " ".repeat(20_000));
            assert_eq!(
                cut_out(large.clone(), 3..large.len(), in_place),
                &large[3..]
            );
            assert_eq!(cut_out(large, 0..1, in_place), " ");
        }
    }
}
