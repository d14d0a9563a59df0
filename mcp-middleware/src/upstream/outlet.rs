//! [`Outlet`]: where a running upstream hands what it reads to the session above it.
//!
//! Everything an upstream connection reads goes to the session loop's channel, except an
//! answer that a hook task awaits itself: the session's [`AnswerTap`] takes that one and hands
//! it to the waiting task directly, without a hop through the loop. It may do so only when the
//! loop has handled every event the outlet sent it before ([`Order`]): a progress notification
//! or a request the upstream sent ahead of the answer then reaches the client ahead of the
//! hook's final answer too, as the upstream ordered them. While the loop is behind (it is
//! busy, or it stops reading the upstream because the client is not reading), answers go
//! through the loop like everything else, so its back-pressure holds.
//!
//! One outlet per start of a connection; a [`ServerSet`](super::ServerSet) gives its own
//! servers plain outlets (its merger renumbers their answers) and taps only its merged output.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::UpstreamEvent;

/// Takes the answers whose waiters are not the session loop's.
pub(crate) trait AnswerTap: Send + Sync + fmt::Debug {
    /// Takes `line` when it answers a request whose waiter is the tap's (the waiter gets it);
    /// gives the line back otherwise.
    fn take_answer(&self, line: String) -> Result<(), String>;
}

/// How many events an outlet sent the loop, and how many of them the loop has handled.
#[derive(Debug, Default)]
pub(crate) struct Order {
    sent: AtomicU64,
    handled: AtomicU64,
}

impl Order {
    /// The loop handled one more event of its upstream channel (call after its effects, such as
    /// lines queued for the client, are done).
    pub(crate) fn handled_one(&self) {
        self.handled.fetch_add(1, Ordering::AcqRel);
    }

    fn sent_one(&self) {
        self.sent.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether the loop has handled everything sent to it.
    fn caught_up(&self) -> bool {
        self.handled.load(Ordering::Acquire) == self.sent.load(Ordering::Acquire)
    }
}

/// Where a running upstream sends its events: the session's channel, and the session's tap for
/// answers that skip the loop (cloning shares both).
#[derive(Debug, Clone)]
pub(crate) struct Outlet {
    events: mpsc::Sender<UpstreamEvent>,
    tap: Option<(Arc<dyn AnswerTap>, Arc<Order>)>,
}

impl Outlet {
    /// An outlet that sends everything to `events`.
    pub(crate) fn new(events: mpsc::Sender<UpstreamEvent>) -> Self {
        Self { events, tap: None }
    }

    /// An outlet whose answers for `tap`'s waiters skip `events` while `order` says the loop
    /// has caught up.
    pub(crate) fn tapped(
        events: mpsc::Sender<UpstreamEvent>,
        tap: Arc<dyn AnswerTap>,
        order: Arc<Order>,
    ) -> Self {
        Self {
            events,
            tap: Some((tap, order)),
        }
    }

    /// Hands `event` on; false when the session is gone.
    pub(crate) async fn send(&self, event: UpstreamEvent) -> bool {
        let Some((tap, order)) = &self.tap else {
            return self.events.send(event).await.is_ok();
        };
        let event = match event {
            UpstreamEvent::Line { generation, line } if order.caught_up() => {
                match tap.take_answer(line) {
                    Ok(()) => return true,
                    Err(line) => UpstreamEvent::Line { generation, line },
                }
            }
            UpstreamEvent::LineFor {
                generation,
                line,
                request,
            } if order.caught_up() => match tap.take_answer(line) {
                Ok(()) => return true,
                Err(line) => UpstreamEvent::LineFor {
                    generation,
                    line,
                    request,
                },
            },
            event => event,
        };
        // Counted before it is sent, so the loop's count can never pass this one.
        order.sent_one();
        self.events.send(event).await.is_ok()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Takes lines that start with "answer".
    #[derive(Debug, Default)]
    struct Takes(Mutex<Vec<String>>);

    impl AnswerTap for Takes {
        fn take_answer(&self, line: String) -> Result<(), String> {
            if line.starts_with("answer") {
                self.0.lock().unwrap().push(line);
                Ok(())
            } else {
                Err(line)
            }
        }
    }

    /// A line event of generation 1 (also `reader_out`'s tests').
    pub(in crate::upstream) fn line(text: &str) -> UpstreamEvent {
        UpstreamEvent::Line {
            generation: 1,
            line: text.to_owned(),
        }
    }

    /// The text an event carries.
    pub(in crate::upstream) fn text(event: UpstreamEvent) -> String {
        match event {
            UpstreamEvent::Line { line, .. } | UpstreamEvent::LineFor { line, .. } => line,
            UpstreamEvent::Closed { how, .. } => how,
            UpstreamEvent::Streamed { head, .. } => head,
        }
    }

    #[tokio::test]
    async fn an_answer_skips_the_loop_only_once_the_loop_handled_what_came_before() {
        let (tx, mut rx) = mpsc::channel(8);
        let tap = Arc::new(Takes::default());
        let order = Arc::new(Order::default());
        let outlet = Outlet::tapped(tx, tap.clone(), order.clone());

        assert!(outlet.send(line("answer 1")).await);
        assert_eq!(tap.0.lock().unwrap().len(), 1, "nothing was ahead of it");

        assert!(outlet.send(line("progress")).await);
        assert!(outlet.send(line("answer 2")).await);
        assert_eq!(
            tap.0.lock().unwrap().len(),
            1,
            "the progress ahead of it is not handled yet"
        );
        assert_eq!(text(rx.recv().await.unwrap()), "progress");
        order.handled_one();
        assert_eq!(text(rx.recv().await.unwrap()), "answer 2");
        order.handled_one();

        assert!(outlet.send(line("answer 3")).await);
        assert_eq!(tap.0.lock().unwrap().len(), 2, "caught up again");
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn an_untapped_outlet_sends_everything_and_reports_a_gone_session() {
        let (tx, mut rx) = mpsc::channel(8);
        let outlet = Outlet::new(tx);
        assert!(outlet.send(line("answer")).await);
        assert_eq!(text(rx.recv().await.unwrap()), "answer");
        drop(rx);
        assert!(!outlet.send(line("answer")).await);
    }
}
