//! Byte-counted queues toward a peer, so a peer that stops reading cannot make the proxy hold
//! an unbounded amount of memory.
//!
//! The session loop never waits on a peer: it hands lines to writer tasks through unbounded
//! channels. Each line carries a [`Ticket`] on its [`Gauge`] for as long as it is held on the
//! way out (in the channel, in an HTTP stream's queue); the ticket gives its bytes back when
//! the line is written or dropped. The session looks at the gauge to decide what to do when a
//! peer falls behind: stop reading the other side (back-pressure), refuse, or end the session.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender, error::SendError};

use super::cut_through::Tail;
use super::outbound::Belongs;

/// How many bytes are waiting for one peer, against a limit.
#[derive(Debug)]
pub(crate) struct Gauge {
    bytes: AtomicUsize,
    limit: usize,
    /// Woken when the bytes drop to the limit or below.
    drained: Notify,
}

impl Gauge {
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            bytes: AtomicUsize::new(0),
            limit,
            drained: Notify::new(),
        })
    }

    /// How many bytes are waiting.
    pub(crate) fn queued(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// The limit the gauge was made with.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Whether more than the limit is waiting.
    pub(crate) fn over(&self) -> bool {
        self.queued() > self.limit
    }

    /// Counts `bytes` until the ticket is dropped.
    pub(crate) fn ticket(self: &Arc<Self>, bytes: usize) -> Ticket {
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
        Ticket {
            gauge: self.clone(),
            bytes,
        }
    }

    /// Resolves once no more than the limit is waiting.
    pub(crate) async fn drained(&self) {
        loop {
            let notified = self.drained.notified();
            tokio::pin!(notified);
            // Registered before the check, so a drain between the two is not missed.
            notified.as_mut().enable();
            if !self.over() {
                return;
            }
            notified.await;
        }
    }
}

/// Bytes counted on a [`Gauge`] until this is dropped.
#[derive(Debug)]
pub(crate) struct Ticket {
    gauge: Arc<Gauge>,
    bytes: usize,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let before = self.gauge.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
        if before > self.gauge.limit && before - self.bytes <= self.gauge.limit {
            self.gauge.drained.notify_waiters();
        }
    }
}

/// One line on its way to a peer, counted until it is written or dropped.
#[derive(Debug)]
pub(crate) struct Queued {
    line: String,
    ticket: Ticket,
    /// What the sender said the line belongs to.
    belongs: Belongs,
    /// The rest of the line, when `line` is only its head (cut-through): only on a queue
    /// whose writer takes tails ([`LineQueue::takes_tails`]).
    tail: Option<Tail>,
}

impl Queued {
    /// The line.
    pub(crate) fn as_str(&self) -> &str {
        &self.line
    }

    /// The line, no longer counted.
    pub(crate) fn into_line(self) -> String {
        self.into_record().0
    }

    /// The line and what it belongs to, no longer counted.
    pub(crate) fn into_record(self) -> (String, Belongs) {
        let Queued {
            line,
            ticket,
            belongs,
            tail,
        } = self;
        drop(ticket);
        debug_assert!(tail.is_none(), "a tail on a queue that takes none");
        (line, belongs)
    }

    /// The rest of the line, when this is the head of a line cut through.
    pub(crate) fn take_tail(&mut self) -> Option<Tail> {
        self.tail.take()
    }
}

impl AsRef<[u8]> for Queued {
    fn as_ref(&self) -> &[u8] {
        self.line.as_bytes()
    }
}

/// The sending side of a counted queue of lines.
#[derive(Debug, Clone)]
pub(crate) struct LineQueue {
    tx: UnboundedSender<Queued>,
    gauge: Arc<Gauge>,
    /// Whether the writer draining this queue writes tails of lines cut through.
    tails: bool,
    /// Set on an adapter's queue that may later hand its writers to the queue behind it
    /// ([`Handover`]).
    handover: Option<Arc<Handover>>,
    /// Set on a queue whose receiver may take lines on the sender's thread ([`Inline`]).
    inline: Option<Arc<Inline>>,
}

/// What takes a line on the sender's thread ([`Inline::start`]). What it hands back (the line,
/// or the part of it not yet written) is queued for the receiver, before anything sent after.
pub(crate) type TakeInline =
    Box<dyn Fn(String, Belongs) -> Option<(String, Belongs)> + Send + Sync>;

/// Lets a queue's receiver take lines on the sender's own thread while nothing is queued
/// before them: an HTTP session's router routes an answer into its stream as the session
/// writes it, and an upstream's stdin takes a request as the session sends it
/// (`transport/pipe_writer.rs`), without a task woken for each line. A line with a tail (cut-through), and every
/// line sent while one is still queued, goes through the channel as before, so no line
/// overtakes one sent before it.
#[derive(Default)]
pub(crate) struct Inline {
    /// Held by senders while they take a line inline or queue one, and by the receiver as it
    /// counts one taken.
    state: Mutex<InlineState>,
    take: OnceLock<TakeInline>,
}

#[derive(Debug, Default)]
struct InlineState {
    /// Lines in the channel the receiver has not dealt with yet.
    queued: usize,
    /// The receiver stopped: sends fail, as on a closed channel.
    closed: bool,
}

impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inline")
            .field("state", &self.state)
            .field("started", &self.take.get().is_some())
            .finish()
    }
}

impl Inline {
    fn lock(&self) -> std::sync::MutexGuard<'_, InlineState> {
        // A poisoned lock only means a sender panicked; the counts stay usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// From now on `take` takes each line sent while nothing is queued (set once; later
    /// calls are ignored).
    pub(crate) fn start(&self, take: TakeInline) {
        let _ = self.take.set(take);
    }

    /// The receiver has dealt with one line it took from the channel.
    pub(crate) fn taken(&self) {
        self.taken_many(1);
    }

    /// The receiver has dealt with `lines` lines it took from the channel.
    pub(crate) fn taken_many(&self, lines: usize) {
        let mut state = self.lock();
        state.queued = state.queued.saturating_sub(lines);
    }

    /// The receiver stops: later sends fail. What is already in the channel is still there.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
    }
}

/// Lets an adapter between a writer and the queue it forwards to step out of the way: once
/// [`complete`](Self::complete)d, lines sent to the adapter's queue go to the queue behind it
/// directly, saving the adapter task's wake-up per line. Lines already in the adapter's
/// channel are moved first, under the same lock that senders take until the handover is done,
/// so no line overtakes one sent before it.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    /// The queue behind, once handed over; read without the lock from then on.
    to: OnceLock<LineQueue>,
    /// Held by senders to the adapter's channel and by the handover itself.
    lock: Mutex<()>,
}

impl Handover {
    /// Drains what is still queued in `rx` into `to`, then sends everything after to `to`
    /// directly. `rx` is the receiver of the queue made with this handover.
    pub(crate) fn complete(&self, rx: &mut UnboundedReceiver<Queued>, to: &LineQueue) {
        // A poisoned lock only means a sender panicked holding `()`; nothing to repair.
        let _held = self
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while let Ok(queued) = rx.try_recv() {
            let (line, belongs) = queued.into_record();
            let _ = to.send_record(line, belongs);
        }
        let _ = self.to.set(to.clone());
    }

    /// Whether the handover is done.
    pub(crate) fn is_complete(&self) -> bool {
        self.to.get().is_some()
    }
}

impl LineQueue {
    /// A queue whose gauge has `limit`, and its receiving side.
    pub(crate) fn new(limit: usize) -> (Self, UnboundedReceiver<Queued>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx,
                gauge: Gauge::new(limit),
                tails: false,
                handover: None,
                inline: None,
            },
            rx,
        )
    }

    /// A queue counted on `gauge`, which another queue already counts on: an adapter between a
    /// writer and a queue it forwards to shows the writer the backlog of the queue behind it.
    pub(crate) fn sharing(gauge: Arc<Gauge>) -> (Self, UnboundedReceiver<Queued>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx,
                gauge,
                tails: false,
                handover: None,
                inline: None,
            },
            rx,
        )
    }

    /// A queue like [`sharing`](Self::sharing) whose adapter may step out later through the
    /// returned [`Handover`].
    pub(crate) fn sharing_with_handover(
        gauge: Arc<Gauge>,
    ) -> (Self, UnboundedReceiver<Queued>, Arc<Handover>) {
        let (mut queue, rx) = Self::sharing(gauge);
        let handover = Arc::new(Handover::default());
        queue.handover = Some(handover.clone());
        (queue, rx, handover)
    }

    /// The same queue, drained by a writer that takes tails of lines cut through
    /// ([`write_queued`](super::lines::write_queued)).
    pub(crate) fn taking_tails(mut self) -> Self {
        self.tails = true;
        self
    }

    /// The same queue, whose receiver may take lines on the sender's thread through the
    /// returned [`Inline`] once it [`start`](Inline::start)s it.
    pub(crate) fn with_inline(mut self) -> (Self, Arc<Inline>) {
        let inline = Arc::new(Inline::default());
        self.inline = Some(inline.clone());
        (self, inline)
    }

    /// Whether the queue's writer takes tails: a line may be queued as its head and a tail.
    pub(crate) fn takes_tails(&self) -> bool {
        self.tails
    }

    /// Queues the head of a line and its tail, which the writer writes as it comes before
    /// anything queued after it. The head is counted; the tail is bounded by its channel.
    /// Only for a queue that [`takes_tails`](Self::takes_tails).
    pub(crate) fn send_with_tail(
        &self,
        head: String,
        tail: Tail,
        belongs: Belongs,
    ) -> Result<(), SendError<String>> {
        debug_assert!(self.tails, "a tail on a queue that takes none");
        let mut inline = self.inline.as_deref().map(Inline::lock);
        if let Some(state) = &mut inline {
            if state.closed {
                return Err(SendError(head));
            }
            state.queued += 1;
        }
        let ticket = self.gauge.ticket(head.len());
        self.tx
            .send(Queued {
                line: head,
                ticket,
                belongs,
                tail: Some(tail),
            })
            .map_err(|SendError(queued)| SendError(queued.line))
    }

    /// Queues one line (counted with its newline). Fails only when the receiver is gone.
    pub(crate) fn send(&self, line: String) -> Result<(), SendError<String>> {
        self.send_record(line, Belongs::Unsaid)
    }

    /// Queues one line with what it belongs to ([`Belongs`]).
    pub(crate) fn send_record(
        &self,
        line: String,
        belongs: Belongs,
    ) -> Result<(), SendError<String>> {
        let Some(handover) = &self.handover else {
            return self.send_here(line, belongs);
        };
        if let Some(to) = handover.to.get() {
            return to.send_record(line, belongs);
        }
        let _held = handover
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match handover.to.get() {
            Some(to) => to.send_record(line, belongs),
            None => self.send_here(line, belongs),
        }
    }

    /// Queues one line on this queue's own channel, or has the receiver take it now
    /// ([`Inline`]) when nothing is queued before it.
    fn send_here(&self, line: String, belongs: Belongs) -> Result<(), SendError<String>> {
        let Some(inline) = &self.inline else {
            return self.send_to_channel(line, belongs);
        };
        // Held while the line is taken or queued: senders keep their order.
        let mut state = inline.lock();
        if state.closed {
            return Err(SendError(line));
        }
        let (line, belongs) = match inline.take.get() {
            Some(take) if state.queued == 0 => match take(line, belongs) {
                None => return Ok(()),
                Some(rest) => rest,
            },
            _ => (line, belongs),
        };
        state.queued += 1;
        self.send_to_channel(line, belongs)
    }

    fn send_to_channel(&self, line: String, belongs: Belongs) -> Result<(), SendError<String>> {
        let ticket = self.gauge.ticket(line.len() + 1);
        self.tx
            .send(Queued {
                line,
                ticket,
                belongs,
                tail: None,
            })
            .map_err(|SendError(queued)| SendError(queued.into_line()))
    }

    /// The gauge of what is waiting.
    pub(crate) fn gauge(&self) -> &Arc<Gauge> {
        &self.gauge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_count_until_the_line_is_taken_and_draining_wakes_waiters() {
        let (queue, mut rx) = LineQueue::new(10);
        queue.send("12345".into()).unwrap();
        assert_eq!(queue.gauge().queued(), 6);
        assert!(!queue.gauge().over());
        queue.send("1234567".into()).unwrap();
        assert!(queue.gauge().over());
        let gauge = queue.gauge().clone();
        let waiter = tokio::spawn(async move { gauge.drained().await });
        let first = rx.recv().await.unwrap();
        assert_eq!(first.as_ref(), b"12345");
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken when the queue drained")
            .unwrap();
        assert_eq!(rx.recv().await.unwrap().into_line(), "1234567");
        assert_eq!(queue.gauge().queued(), 0);
        drop(rx);
        assert_eq!(queue.send("x".into()).unwrap_err().0, "x");
        assert_eq!(queue.gauge().queued(), 0, "a refused line is not counted");
    }

    #[test]
    fn a_handover_moves_what_waits_first_and_sends_the_rest_behind_it() {
        let (behind, mut behind_rx) = LineQueue::new(100);
        let (adapter, mut adapter_rx, handover) =
            LineQueue::sharing_with_handover(behind.gauge().clone());
        adapter.send("one".into()).unwrap();
        adapter.send("two".into()).unwrap();
        assert!(
            behind_rx.try_recv().is_err(),
            "nothing passes the adapter yet"
        );
        assert!(!handover.is_complete());

        handover.complete(&mut adapter_rx, &behind);
        assert!(handover.is_complete());
        adapter.send("three".into()).unwrap();
        assert!(
            adapter_rx.try_recv().is_err(),
            "the adapter's channel is stepped out"
        );
        let lines: Vec<String> = std::iter::from_fn(|| behind_rx.try_recv().ok())
            .map(Queued::into_line)
            .collect();
        assert_eq!(lines, ["one", "two", "three"], "in the order sent");
        assert_eq!(
            behind.gauge().queued(),
            0,
            "every taken line gave its bytes back"
        );
    }

    #[test]
    fn an_inline_receiver_takes_lines_while_none_waits_before_them() {
        let taken = Arc::new(Mutex::new(Vec::new()));
        let (queue, mut rx) = LineQueue::new(100);
        let (queue, inline) = queue.taking_tails().with_inline();
        queue.send("before start".into()).unwrap();
        let into = taken.clone();
        inline.start(Box::new(move |line, _| {
            into.lock().unwrap().push(line);
            None
        }));
        queue.send("behind the queued one".into()).unwrap();
        let (_tx, tail) = tokio::sync::mpsc::channel(1);
        queue
            .send_with_tail("head".into(), tail, Belongs::Unsaid)
            .unwrap();
        queue.send("behind the tail".into()).unwrap();
        assert!(
            taken.lock().unwrap().is_empty(),
            "none overtakes a queued line"
        );
        let channel: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|mut queued| {
                queued.take_tail();
                queued.into_line()
            })
            .collect();
        assert_eq!(
            channel,
            [
                "before start",
                "behind the queued one",
                "head",
                "behind the tail"
            ]
        );
        for _ in 0..channel.len() {
            inline.taken();
        }
        queue.send("inline".into()).unwrap();
        assert_eq!(*taken.lock().unwrap(), ["inline"]);
        assert!(rx.try_recv().is_err(), "taken on the sender's thread");
        assert_eq!(
            queue.gauge().queued(),
            0,
            "what is taken inline is not counted here"
        );

        inline.close();
        assert_eq!(queue.send("late".into()).unwrap_err().0, "late");
        assert_eq!(*taken.lock().unwrap(), ["inline"]);
    }

    /// What the inline receiver hands back (a pipe with no room) is queued, and lines sent
    /// after it wait behind it until the receiver has dealt with it.
    #[test]
    fn a_line_handed_back_is_queued_and_keeps_its_place() {
        let taken = Arc::new(Mutex::new(Vec::new()));
        let (queue, mut rx) = LineQueue::new(100);
        let (queue, inline) = queue.with_inline();
        let into = taken.clone();
        inline.start(Box::new(move |line: String, belongs| {
            if let Some(rest) = line.strip_prefix("half:") {
                return Some((rest.to_owned(), belongs));
            }
            into.lock().unwrap().push(line);
            None
        }));
        queue.send("whole".into()).unwrap();
        queue.send("half:rest".into()).unwrap();
        queue.send("after".into()).unwrap();
        assert_eq!(*taken.lock().unwrap(), ["whole"]);
        let channel: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(Queued::into_line)
            .collect();
        assert_eq!(channel, ["rest", "after"]);
        inline.taken_many(2);
        queue.send("inline again".into()).unwrap();
        assert_eq!(*taken.lock().unwrap(), ["whole", "inline again"]);
    }
}
