//! The hooked call's way back: a hook task writes its final answer to the client writer's
//! queue itself, without a hop through the session loop, when the session allows it.
//!
//! The loop opens this end exactly while a final answer needs nothing of it: the client's era
//! is settled and not bridged (a bridged answer is completed for 2026-07-28), the client is not
//! a stateless one (whose calls can be suspended in input rounds and resumed under a new id),
//! no request tap follows answers, and no model observes requests (observers run in the loop
//! and see each answer before the next request). Otherwise the answer goes to the loop as
//! [`LoopCall::Finished`](crate::context::LoopCall::Finished), as before.
//!
//! Each hooked call has an [`Answer`] that the loop and its task share: whoever claims it first
//! answers the client, so a call that times out in the loop as its task finishes is answered
//! once. The task that answered leaves its call for the loop to forget when it next runs,
//! without waking it (`Hooked::forget_answered`); until then the loop treats a claimed call as
//! finished (the client may reuse its id at once).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use rmcp::model::ErrorData;

use crate::context::RawOutcome;
use crate::jsonrpc;
use crate::transport::outbound::Belongs;
use crate::transport::queue::LineQueue;

/// Nobody answered yet.
const OPEN: u8 = 0;
/// The loop answers (or nobody does: the call was cancelled, suspended or timed out).
const LOOP: u8 = 1;
/// The call's task answered the client itself.
const TASK: u8 = 2;

/// Who answers one hooked call (cloning shares it).
#[derive(Debug, Clone, Default)]
pub(crate) struct Answer(Arc<AtomicU8>);

impl Answer {
    /// The loop takes the answer over; false when the task already answered.
    pub(crate) fn take_for_loop(&self) -> bool {
        match self
            .0
            .compare_exchange(OPEN, LOOP, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(now) => now == LOOP,
        }
    }

    /// Whether the call's task answered the client itself.
    pub(crate) fn by_task(&self) -> bool {
        self.0.load(Ordering::Acquire) == TASK
    }

    fn take_for_task(&self) -> bool {
        self.0
            .compare_exchange(OPEN, TASK, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// The queue to the client's writer, for hook tasks, and whether they may use it now.
#[derive(Debug, Clone)]
pub(crate) struct ClientEnd {
    to_client: LineQueue,
    open: Arc<AtomicBool>,
}

impl ClientEnd {
    /// A closed end writing to `to_client` once opened.
    pub(crate) fn new(to_client: LineQueue) -> Self {
        Self {
            to_client,
            open: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Lets tasks answer the client themselves (`true`), or makes them go through the loop.
    pub(crate) fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::Release);
    }

    /// Writes the final answer of the hooked call the client knows as `client_id`, when this
    /// end is open and the loop has not taken `answer` over; gives `outcome` back otherwise,
    /// for the loop.
    pub(crate) fn finish(
        &self,
        answer: &Answer,
        client_id: &str,
        outcome: RawOutcome,
    ) -> Result<(), RawOutcome> {
        if !self.open.load(Ordering::Acquire) || !answer.take_for_task() {
            return Err(outcome);
        }
        let _ = self.to_client.send_record(
            answer_line(client_id, outcome),
            Belongs::Response(client_id.into()),
        );
        Ok(())
    }
}

/// The JSON-RPC response to the client's request `id`.
pub(super) fn answer_line(id: &str, outcome: RawOutcome) -> String {
    match outcome {
        Ok(result) => jsonrpc::result_around(id, result),
        Err(error) => error_line(id, &error),
    }
}

/// The JSON-RPC error response to `id`.
pub(super) fn error_line(id: &str, error: &ErrorData) -> String {
    match serde_json::to_string(error) {
        Ok(error) => jsonrpc::error_response(id, &error),
        Err(_) => jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, &error.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end() -> (
        ClientEnd,
        tokio::sync::mpsc::UnboundedReceiver<crate::transport::queue::Queued>,
    ) {
        let (queue, rx) = LineQueue::new(1 << 20);
        (ClientEnd::new(queue), rx)
    }

    #[test]
    fn a_closed_end_gives_the_answer_back_for_the_loop() {
        let (end, mut rx) = end();
        let answer = Answer::default();
        let back = end.finish(&answer, "7", Ok("{}".into())).unwrap_err();
        assert_eq!(back.unwrap(), "{}");
        assert!(rx.try_recv().is_err());
        assert!(answer.take_for_loop(), "the loop may still answer");
    }

    #[test]
    fn an_open_end_writes_the_answer_under_the_clients_id_once() {
        let (end, mut rx) = end();
        end.set_open(true);
        let answer = Answer::default();
        end.finish(&answer, "\"a\"", Ok(r#"{"x":1}"#.into()))
            .unwrap();
        let (line, belongs) = rx.try_recv().unwrap().into_record();
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#);
        assert!(matches!(belongs, Belongs::Response(id) if &*id == "\"a\""));
        assert!(answer.by_task());
        assert!(!answer.take_for_loop(), "the loop must not answer again");
        assert!(end.finish(&answer, "\"a\"", Ok("{}".into())).is_err());
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_call_the_loop_took_over_is_not_answered_by_its_task() {
        let (end, mut rx) = end();
        end.set_open(true);
        let answer = Answer::default();
        assert!(answer.take_for_loop());
        assert!(
            answer.take_for_loop(),
            "taking it twice is still the loop's"
        );
        let error = ErrorData::internal_error("late", None);
        assert!(end.finish(&answer, "1", Err(error)).is_err());
        assert!(rx.try_recv().is_err());
        assert!(!answer.by_task());
    }

    #[test]
    fn an_error_answer_is_a_json_rpc_error_response() {
        let (end, mut rx) = end();
        end.set_open(true);
        let error = ErrorData::invalid_params("no such tool", None);
        end.finish(&Answer::default(), "3", Err(error)).unwrap();
        let line = rx.try_recv().unwrap().into_line();
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["id"], 3);
        assert_eq!(value["error"]["code"], -32602);
        assert_eq!(value["error"]["message"], "no such tool");
    }
}
