//! [`UpstreamLink`]: a running upstream of any kind, as the session holds it (the queue to its
//! input and the task that reads it and reports [`UpstreamEvent`](super::UpstreamEvent)s).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::transport::cut_through::CutThrough;
use crate::transport::queue::{Gauge, LineQueue};

/// A running upstream: the queue to its input and the task reading its output (a child's
/// stdout, an HTTP server's responses and streams).
#[derive(Debug)]
pub(crate) struct UpstreamLink {
    outgoing: LineQueue,
    task: JoinHandle<()>,
    /// A server set's merger takes a new set here and reshapes itself server by server
    /// (`set.rs`); `None` for one server.
    reshape: Option<mpsc::UnboundedSender<super::ServerSet>>,
    /// The requests whose answers this upstream's reader may cut through to the client
    /// (`transport/cut_through.rs`); `None` where the reader does not cut through.
    cut_through: Option<Arc<CutThrough>>,
}

impl UpstreamLink {
    pub(crate) fn new(outgoing: LineQueue, task: JoinHandle<()>) -> Self {
        Self {
            outgoing,
            task,
            reshape: None,
            cut_through: None,
        }
    }

    /// The link to an upstream whose reader cuts through the answers `table` allows.
    pub(crate) fn with_cut_through(mut self, table: Arc<CutThrough>) -> Self {
        self.cut_through = Some(table);
        self
    }

    /// The requests whose answers the reader may cut through, when it does.
    pub(crate) fn cut_through(&self) -> Option<&Arc<CutThrough>> {
        self.cut_through.as_ref()
    }

    /// The link to a server set's merger, which takes new sets on `reshape`.
    pub(crate) fn with_reshape(mut self, reshape: mpsc::UnboundedSender<super::ServerSet>) -> Self {
        self.reshape = Some(reshape);
        self
    }

    /// Hands a running server set its new configuration, to start, stop and restart only the
    /// servers that differ. False when this link is no set's, or its merger is gone.
    pub(crate) fn reshape(&self, set: super::ServerSet) -> bool {
        self.reshape.as_ref().is_some_and(|tx| tx.send(set).is_ok())
    }

    /// The queue to the server's input, for those who write to it beside the session loop.
    pub(crate) fn queue(&self) -> LineQueue {
        self.outgoing.clone()
    }

    /// What waits for the server to read it.
    pub(crate) fn backlog(&self) -> &Gauge {
        self.outgoing.gauge()
    }

    /// Queues one line for the server. A closed queue means the server is gone; its reader
    /// reports that as [`UpstreamEvent::Closed`](super::UpstreamEvent::Closed).
    pub(crate) fn send(&self, line: String) {
        let _ = self.outgoing.send(line);
    }

    /// Closes the server's stdin and gives it `grace` to exit before it is killed.
    pub(crate) async fn shut_down(mut self, grace: Duration) {
        // Closing the queue ends the writer task, which closes the child's stdin.
        let (closed, _) = LineQueue::new(usize::MAX);
        drop(std::mem::replace(&mut self.outgoing, closed));
        let abort = self.task.abort_handle();
        if tokio::time::timeout(grace, &mut self.task).await.is_err() {
            // Dropping the task's future drops the `Child`, which kills it (kill_on_drop).
            abort.abort();
        }
    }
}

impl Drop for UpstreamLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}
