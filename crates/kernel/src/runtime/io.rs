//! The node's `io` threads (NDB: NDBFS and its file threads): the file
//! requests blocks hand over with [`Context::io`](crate::Context::io) run
//! here, so that an fsync (milliseconds on a good disk, tens on a slow one)
//! never stalls an execution thread and the transactions behind it. Each
//! request's `FsConf` goes back to its block through an [`Injector`] of the
//! io thread that ran it.
//!
//! One bounded queue feeds all io threads; a request is taken by whichever
//! thread is free, so requests of one block may complete in any order (the
//! contract of `IoRequest`). An execution thread that finds the queue full
//! waits for room: the queue only fills when the disk is far behind, and a
//! block keeps few requests in flight (an LDM instance: one redo sync and
//! one checkpoint step), so the bound is never reached in normal running.
//! On stop the requests not yet taken are dropped, as a crash drops them.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use signal::Signal;

use super::injector::Injector;
use super::shared::Shared;
use crate::block::IoRequest;

/// Requests waiting for an io thread, all execution threads together.
pub const IO_QUEUE_REQUESTS_MAX: usize = 1024;

/// The queue between the execution threads and the io threads.
pub(crate) struct IoQueue {
    state: Mutex<IoState>,
    /// Signalled when a request is queued or the runtime stops.
    requests: Condvar,
    /// Signalled when a request is taken (room for a waiting submitter).
    room: Condvar,
}

struct IoState {
    queue: VecDeque<IoRequest>,
    stop: bool,
}

impl IoQueue {
    pub(crate) fn new() -> IoQueue {
        IoQueue {
            state: Mutex::new(IoState {
                queue: VecDeque::with_capacity(IO_QUEUE_REQUESTS_MAX),
                stop: false,
            }),
            requests: Condvar::new(),
            room: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, IoState> {
        // A panicking job never holds the lock (jobs run unlocked).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `request` for an io thread; waits while the queue is full.
    /// After stop the request is dropped.
    pub(crate) fn submit(&self, request: IoRequest) {
        let mut state = self.lock();
        while state.queue.len() >= IO_QUEUE_REQUESTS_MAX && !state.stop {
            state = self
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.stop {
            return;
        }
        state.queue.push_back(request);
        debug_assert!(state.queue.len() <= IO_QUEUE_REQUESTS_MAX);
        drop(state);
        self.requests.notify_one();
    }

    /// The next request, waiting for one; `None` once stopped.
    fn take(&self) -> Option<IoRequest> {
        let mut state = self.lock();
        loop {
            if state.stop {
                return None;
            }
            if let Some(request) = state.queue.pop_front() {
                drop(state);
                self.room.notify_one();
                return Some(request);
            }
            state = self
                .requests
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Ends every io thread's wait and every submitter's; what is queued is dropped.
    pub(crate) fn stop(&self) {
        let mut state = self.lock();
        state.stop = true;
        state.queue.clear();
        drop(state);
        self.requests.notify_all();
        self.room.notify_all();
    }
}

/// One io thread's loop: take a request, run it, hand its `FsConf` to the
/// block's thread. Returns when the runtime stops.
pub(crate) fn run_io_thread(queue: Arc<IoQueue>, shared: Arc<Shared>, mut injector: Injector) {
    while let Some(request) = queue.take() {
        let conf = request.run();
        deliver(&shared, &mut injector, conf);
    }
}

/// Pushes `conf` into its block's thread, waiting for room in that queue
/// (the thread drains it, so room comes) unless the runtime stops.
fn deliver(shared: &Shared, injector: &mut Injector, conf: Signal) {
    let mut conf = conf;
    loop {
        match injector.push(conf) {
            Ok(()) => break,
            Err(back) => {
                conf = back;
                injector.flush();
                if shared.stopping() {
                    return;
                }
                std::thread::yield_now();
            }
        }
    }
    injector.flush();
}
