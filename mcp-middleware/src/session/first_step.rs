//! Running a hooked call's first step where it starts: its future is polled once on the
//! session loop's thread, and becomes a task only when something wakes it.
//!
//! Why: a task spawned by the session loop often cost a hand-off to another worker. The loop
//! is usually the third task in a row that tokio runs from its LIFO slot on an HTTP request
//! (connection, body, connection again, loop), and tokio caps that run at three, so what the
//! loop spawns goes to the run queue and wakes a parked worker (the guide's Performance
//! page). Polled here instead, the call's first step (through the chain to its upstream
//! write) costs no task at all; a call that finishes without waiting (refused, or
//! answered from what a model keeps) never becomes one. The task is spawned by whoever wakes
//! the call (usually the upstream's reader handing it its answer), which puts it in that
//! worker's LIFO slot. Calls that wait still run as tasks of their own, so concurrent calls of
//! one session keep running on both workers.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Wake, Waker};

use tokio::runtime::Handle;
use tokio::task::AbortHandle;

type Step = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Stops a call started by [`start`], wherever it is.
pub(super) struct CallHandle(Arc<Parked>);

impl CallHandle {
    /// Drops the call's future: now if it waits to be woken, else by aborting its task.
    pub(super) fn abort(&self) {
        let stopped = std::mem::replace(&mut *self.0.lock(), State::Stopped);
        match stopped {
            State::Spawned(task) => task.abort(),
            // Dropped outside the lock: its drop may wake (and so lock) this call again.
            State::Parked(step) => drop(step),
            State::Polling { .. } | State::Stopped => {}
        }
    }
}

/// Polls `call` once here, with a waker that spawns it on `runtime` the first time it is
/// woken. Returns its handle (a call that already finished has nothing left to stop).
pub(super) fn start<F>(runtime: &Handle, call: F) -> CallHandle
where
    F: Future<Output = ()> + Send + 'static,
{
    let parked = Arc::new(Parked {
        state: Mutex::new(State::Polling { woken: false }),
        runtime: runtime.clone(),
    });
    let handle = CallHandle(parked.clone());
    let mut step: Step = Box::pin(call);
    let waker = Waker::from(parked.clone());
    if step
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready()
    {
        *parked.lock() = State::Stopped;
        return handle;
    }
    let mut state = parked.lock();
    match *state {
        // Woken while it was being polled: it has more to do now.
        State::Polling { woken: true } => {
            *state = State::Spawned(parked.runtime.spawn(step).abort_handle());
        }
        State::Polling { woken: false } => *state = State::Parked(step),
        // Aborted while it was being polled (by itself).
        State::Stopped | State::Parked(_) | State::Spawned(_) => {
            drop(state);
            drop(step);
        }
    }
    handle
}

/// Where a started call is, shared by its handle and its first waker.
struct Parked {
    state: Mutex<State>,
    runtime: Handle,
}

enum State {
    /// Being polled on the thread that started it.
    Polling { woken: bool },
    /// Waiting for its first wake.
    Parked(Step),
    /// A task of its own.
    Spawned(AbortHandle),
    /// Finished or aborted.
    Stopped,
}

impl Parked {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a thread panicked holding it; the state is still whole.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Wake for Parked {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, State::Stopped) {
            State::Polling { .. } => *state = State::Polling { woken: true },
            // The task's first poll registers its own waker: this one is not used again.
            State::Parked(step) => *state = State::Spawned(self.runtime.spawn(step).abort_handle()),
            other => *state = other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    /// Sets its flag when dropped.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_call_that_does_not_wait_runs_to_its_end_where_it_starts() {
        let (done, mut rx) = oneshot::channel();
        let handle = start(&Handle::current(), async move {
            let _ = done.send(std::thread::current().id());
        });
        assert_eq!(rx.try_recv().unwrap(), std::thread::current().id());
        assert!(matches!(*handle.0.lock(), State::Stopped));
    }

    #[tokio::test]
    async fn a_waiting_call_becomes_a_task_when_woken_and_finishes_there() {
        let (go, wait) = oneshot::channel::<()>();
        let (done, finished) = oneshot::channel();
        let handle = start(&Handle::current(), async move {
            let _ = wait.await;
            let _ = done.send(());
        });
        assert!(matches!(*handle.0.lock(), State::Parked(_)));
        // Woken from a thread outside the runtime, as a sandbox's thread may.
        std::thread::spawn(move || go.send(()))
            .join()
            .unwrap()
            .unwrap();
        assert!(matches!(*handle.0.lock(), State::Spawned(_)));
        tokio::time::timeout(Duration::from_secs(5), finished)
            .await
            .expect("the woken call ran as a task")
            .unwrap();
    }

    #[tokio::test]
    async fn aborting_drops_a_parked_call_at_once_and_a_spawned_one_soon() {
        let parked_dropped = Arc::new(AtomicBool::new(false));
        let flag = Dropped(parked_dropped.clone());
        let handle = start(&Handle::current(), async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        });
        handle.abort();
        assert!(
            parked_dropped.load(Ordering::SeqCst),
            "dropped by abort itself"
        );

        let spawned_dropped = Arc::new(AtomicBool::new(false));
        let flag = Dropped(spawned_dropped.clone());
        let (go, wait) = oneshot::channel::<()>();
        let handle = start(&Handle::current(), async move {
            let _flag = flag;
            let _ = wait.await;
            std::future::pending::<()>().await;
        });
        go.send(()).unwrap();
        handle.abort();
        let dropped = async {
            while !spawned_dropped.load(Ordering::SeqCst) {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), dropped)
            .await
            .expect("the aborted task dropped its future");
    }

    #[tokio::test]
    async fn a_call_woken_while_it_is_polled_goes_on_as_a_task() {
        let (done, finished) = oneshot::channel();
        let _handle = start(&Handle::current(), async move {
            tokio::task::yield_now().await;
            let _ = done.send(());
        });
        tokio::time::timeout(Duration::from_secs(5), finished)
            .await
            .expect("the self-woken call went on")
            .unwrap();
    }
}
