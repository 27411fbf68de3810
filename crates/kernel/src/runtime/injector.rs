//! Feeding signals from threads outside the runtime — the transport's
//! receive thread, the management session — into the execution threads.
//! Each injector has its own SPSC queue to every execution thread, so
//! feeders never contend with each other or with the execution threads.

use std::sync::Arc;

use rtrb::{Producer, PushError};
use signal::Signal;

use super::routing::{DropLog, RouteTable};
use super::shared::{wake_marked, Shared};

/// A feeder's handle: one per feeding thread, made by
/// [`Runtime::injector`](super::Runtime::injector) before the runtime starts.
pub struct Injector {
    shared: Arc<Shared>,
    routes: Arc<RouteTable>,
    /// Indexed by execution thread.
    queues: Vec<Producer<Signal>>,
    /// Threads that got signals since the last flush.
    wake: Vec<bool>,
    drops: DropLog,
}

impl Injector {
    pub(crate) fn new(
        shared: Arc<Shared>,
        routes: Arc<RouteTable>,
        queues: Vec<Producer<Signal>>,
    ) -> Injector {
        assert_eq!(queues.len(), shared.threads.len());
        let wake = vec![false; queues.len()];
        Injector {
            shared,
            routes,
            queues,
            wake,
            drops: DropLog::new(),
        }
    }

    /// Queues `signal` for the thread that runs its receiver. `Err` gives the
    /// signal back when that queue is full: `flush`, and try again later.
    /// A signal for another node, or for an address no block of this node
    /// has, is dropped and counted (`RunningRuntime::dropped_signals`), as
    /// the execution threads do.
    pub fn push(&mut self, signal: Signal) -> Result<(), Signal> {
        let route = if signal.receiver.node == self.shared.node {
            self.routes.get(signal.receiver)
        } else {
            None
        };
        let Some(route) = route else {
            self.drops.note(
                &self.shared,
                "injector",
                signal.body.name(),
                signal.sender,
                signal.receiver,
            );
            return Ok(());
        };
        // Also when full: the thread must run to drain its queue.
        self.wake[route.thread] = true;
        match self.queues[route.thread].push(signal) {
            Ok(()) => Ok(()),
            Err(PushError::Full(signal)) => Err(signal),
        }
    }

    /// Wakes the threads that got signals since the last flush. Call once
    /// per batch of pushes, not per signal.
    pub fn flush(&mut self) {
        wake_marked(&self.shared.threads, &mut self.wake);
    }
}

impl Drop for Injector {
    fn drop(&mut self) {
        self.flush();
    }
}
