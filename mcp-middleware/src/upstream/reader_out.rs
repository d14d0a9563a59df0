//! [`ReaderOut`]: where an upstream connection's reader sends what it reads. First the era
//! adapter's channel (`reverse_bridge`), which looks at the server's first answers to learn
//! its era; once the adapter is transparent for good it steps out ([`StepOut`]) and the reader
//! sends to the session's [`Outlet`] itself, saving the adapter task's wake-up per message.

use std::sync::{Arc, OnceLock};

use tokio::sync::{RwLock, mpsc};

use super::{Outlet, UpstreamEvent};

/// The sending side a reader holds (cloning shares it).
#[derive(Debug, Clone)]
pub(crate) struct ReaderOut {
    adapter: mpsc::Sender<UpstreamEvent>,
    direct: Arc<Direct>,
}

/// The adapter's handle for stepping out of a reader's way.
#[derive(Debug)]
pub(crate) struct StepOut {
    direct: Arc<Direct>,
}

/// What the reader and the adapter share.
#[derive(Debug, Default)]
struct Direct {
    /// The session's outlet once the adapter stepped out; read without the lock from then on.
    outlet: OnceLock<Outlet>,
    /// Read-held by a reader while it puts an event into the adapter's channel, write-held by
    /// the step-out: no event overtakes one sent before it.
    lock: RwLock<()>,
}

impl ReaderOut {
    /// A reader's side sending to `adapter`, and the adapter's handle for stepping out.
    pub(crate) fn new(adapter: mpsc::Sender<UpstreamEvent>) -> (Self, StepOut) {
        let direct = Arc::new(Direct::default());
        (
            Self {
                adapter,
                direct: direct.clone(),
            },
            StepOut { direct },
        )
    }

    /// Sends one event on; false when its receiver (the adapter, or the session) is gone.
    pub(crate) async fn send(&self, event: UpstreamEvent) -> bool {
        if let Some(outlet) = self.direct.outlet.get() {
            return outlet.send(event).await;
        }
        // Room in the adapter's channel is waited for without the lock: only the adapter makes
        // room there, and it takes the lock to step out. Gone, it may have stepped out first.
        let permit = self.adapter.reserve().await;
        let _held = self.direct.lock.read().await;
        match (self.direct.outlet.get(), permit) {
            (Some(outlet), _) => outlet.send(event).await,
            (None, Ok(permit)) => {
                permit.send(event);
                true
            }
            (None, Err(_)) => false,
        }
    }
}

impl StepOut {
    /// Forwards what the reader already sent to the adapter (`from`) to `outlet`, in order, then
    /// has the reader send to `outlet` itself. False when the session is gone.
    pub(crate) async fn complete(
        &self,
        from: &mut mpsc::Receiver<UpstreamEvent>,
        outlet: &Outlet,
    ) -> bool {
        let _held = self.direct.lock.write().await;
        while let Ok(event) = from.try_recv() {
            if !outlet.send(event).await {
                return false;
            }
        }
        let _ = self.direct.outlet.set(outlet.clone());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::outlet::tests::{line, text};
    use super::*;

    #[tokio::test]
    async fn after_the_step_out_the_reader_sends_to_the_session_behind_what_waited() {
        let (to_adapter, mut adapter) = mpsc::channel(8);
        let (to_session, mut session) = mpsc::channel(8);
        let outlet = Outlet::new(to_session);
        let (reader, step_out) = ReaderOut::new(to_adapter);
        assert!(reader.send(line("one")).await);
        assert!(reader.send(line("two")).await);
        assert!(step_out.complete(&mut adapter, &outlet).await);
        assert!(reader.send(line("three")).await);
        assert!(adapter.try_recv().is_err(), "the adapter is out of the way");
        let got: Vec<String> = std::iter::from_fn(|| session.try_recv().ok())
            .map(text)
            .collect();
        assert_eq!(got, ["one", "two", "three"], "in the order read");
        drop(session);
        assert!(!reader.send(line("late")).await, "the session is gone");
    }

    /// A reader waiting for room in a full adapter channel does not keep the adapter from
    /// stepping out: the adapter drains what waited, and the waiting event follows it.
    #[tokio::test]
    async fn a_reader_waiting_on_a_full_channel_does_not_block_the_step_out() {
        let (to_adapter, mut adapter) = mpsc::channel(2);
        let (to_session, mut session) = mpsc::channel(8);
        let outlet = Outlet::new(to_session);
        let (reader, step_out) = ReaderOut::new(to_adapter);
        assert!(reader.send(line("one")).await);
        assert!(reader.send(line("two")).await);
        let waiting = tokio::spawn({
            let reader = reader.clone();
            async move { reader.send(line("three")).await }
        });
        // The third send waits for room (the channel holds two) before the step-out runs.
        tokio::task::yield_now().await;
        let stepped = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            step_out.complete(&mut adapter, &outlet),
        )
        .await
        .expect("the step-out is not held up by the waiting reader");
        assert!(stepped);
        assert!(waiting.await.expect("the reader's task"));
        assert!(reader.send(line("four")).await);
        let got: Vec<String> = std::iter::from_fn(|| session.try_recv().ok())
            .map(text)
            .collect();
        assert_eq!(got, ["one", "two", "three", "four"]);
    }
}
