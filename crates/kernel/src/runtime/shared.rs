//! What an execution thread shares with the threads that feed it and with
//! the watchdog: whether it sleeps (so producers know to wake it), whether
//! it is busy and how far it got (so the watchdog can tell stuck from idle),
//! and the runtime-wide stop flag. Everything else a thread owns alone.
//!
//! # No lost wake-ups
//!
//! A consumer going to sleep and a producer handing it signals run this
//! Dekker-style protocol:
//!
//! - consumer: `sleeping := true`; SeqCst fence; re-check every incoming
//!   queue; park only if all were empty.
//! - producer: push into the queue (a release store of the queue's tail);
//!   SeqCst fence; read `sleeping`; unpark if it was true.
//!
//! The two fences are totally ordered. If the producer's fence comes first,
//! the consumer's re-check (after its own fence) sees the pushed tail and
//! does not park. If the consumer's fence comes first, the producer's read
//! (after its fence) sees `sleeping == true` and unparks. Either way the
//! signal is seen. An unpark that lands before the consumer actually parks
//! is not lost either: `Thread::unpark` leaves a token that makes the next
//! `park` return at once.
//!
//! A thread that runs a `Poller` blocks in `Poller::wait` instead of `park`,
//! and producers wake it through its `PollWaker` instead of `unpark`. The
//! protocol above is unchanged: the flag, the fences and the re-check are
//! the same, only the blocking call differs, and `Poller::wait` promises
//! what `park` gives: a wake that lands before the wait makes it return at
//! once (the transport's waker is an eventfd in the poll set: a write before
//! `epoll_wait` leaves it ready). So the argument holds word for word.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;

use crossbeam_utils::CachePadded;
use signal::{BlockRef, NodeId};

use super::PollWaker;
use crate::thread_config::ThreadRole;

/// One execution thread as others see it.
pub(crate) struct ThreadShared {
    pub(crate) name: String,
    pub(crate) role: ThreadRole,
    /// True from just before the thread checks its queues a last time until
    /// it returns from `park`.
    sleeping: AtomicBool,
    /// False while the thread sleeps: a sleeping thread is never stuck.
    busy: AtomicBool,
    /// Grows with every executed signal and every wake-up; written only by
    /// the thread itself.
    progress: AtomicU64,
    /// Set by the thread itself before it can first sleep.
    handle: OnceLock<Thread>,
    /// Set before the thread starts when it runs a poller: it sleeps in the
    /// poller's wait, and this wakes it.
    poll_waker: OnceLock<Arc<dyn PollWaker>>,
    /// The figures ndbinfo's `threadstat` shows ([`ThreadFigure`]): written
    /// by the thread itself with relaxed stores, except `wakes`.
    figures: Figures,
    /// The blocks placed on the thread (ndbinfo's `threadblocks`), in
    /// placement order; fixed once the runtime is built.
    blocks: Vec<BlockRef>,
}

/// The published figures of one execution thread (see [`ThreadFigure`]).
#[derive(Default)]
struct Figures {
    os_tid: AtomicU64,
    loops: AtomicU64,
    signals: AtomicU64,
    sleeps: AtomicU64,
    queue_depth: AtomicU64,
    /// Counted by the producers that wake the thread: a locked add, but
    /// only next to the `unpark` or poller wake-up (a system call) it counts.
    wakes: AtomicU64,
    /// Time asleep, spinning idle, and waiting on a full queue to another
    /// thread, in ns (`cpustat`): clocked only around a sleep, at the ends
    /// of a spin and while a queue is full, never per signal or per round.
    sleep_ns: AtomicU64,
    spin_ns: AtomicU64,
    buffer_full_ns: AtomicU64,
    /// The spin in force (`runtime::spin`), in µs: set at each decision.
    spin_limit_us: AtomicU64,
}

/// What ndbinfo's `threadstat` shows of one execution thread: counters
/// since it started, as some recent moment's values (each figure read on
/// its own, as NDB's are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadFigure {
    /// The layout's name for the thread (`main`, `ldm0`, ...).
    pub name: String,
    pub role: ThreadRole,
    /// The kernel's thread id (`gettid`); 0 before the thread started.
    pub os_tid: u64,
    /// Rounds over its sources (NDB's `c_loop`).
    pub loops: u64,
    /// Signals executed (NDB's `c_exec`).
    pub signals: u64,
    /// Times it went to sleep for want of work (NDB's `c_wait`).
    pub sleeps: u64,
    /// Times another thread woke it from such a sleep.
    pub wakes: u64,
    /// Signals waiting in its queues when it last looked at them.
    pub queue_depth: u64,
    /// Time it slept for want of work, in ns.
    pub sleep_ns: u64,
    /// Time it spun idle (`spintime`) before sleeping or finding work, in ns.
    pub spin_ns: u64,
    /// Time it waited for room in a full queue to another thread, in ns.
    pub buffer_full_ns: u64,
    /// How long it spins now before sleeping, in µs: its `spintime`, or
    /// what an adaptive `SpinMethod` last chose.
    pub spin_limit_us: u64,
    /// The blocks it runs, in placement order.
    pub blocks: Vec<BlockRef>,
}

/// One execution thread over the last complete [`CPU_WINDOW`] (ndbinfo's
/// `cpustat`, which NDB's THRMAN measures each second): times in
/// microseconds. What is neither asleep, spinning nor waiting on a full
/// queue is execution (signals, polling, sending).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuWindow {
    /// The window's length by the clock.
    pub elapsed_us: u64,
    /// CPU the kernel charged to the thread, in user mode and in the kernel.
    pub os_user_us: u64,
    pub os_system_us: u64,
    pub sleep_us: u64,
    pub spin_us: u64,
    pub buffer_full_us: u64,
}

impl CpuWindow {
    /// `part_us` as a whole percentage of the window, at most 100.
    pub fn percent(&self, part_us: u64) -> u64 {
        if self.elapsed_us == 0 {
            return 0;
        }
        let pct = (u128::from(part_us) * 100 + u128::from(self.elapsed_us) / 2)
            / u128::from(self.elapsed_us);
        pct.min(100) as u64
    }

    /// The time the thread was neither asleep, spinning nor held by a full
    /// queue.
    pub fn exec_us(&self) -> u64 {
        self.elapsed_us
            .saturating_sub(self.sleep_us)
            .saturating_sub(self.spin_us)
            .saturating_sub(self.buffer_full_us)
    }
}

/// How often the watchdog takes the [`CpuWindow`]s.
pub const CPU_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

impl ThreadShared {
    /// This thread's figures now.
    pub(crate) fn figure(&self) -> ThreadFigure {
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        let f = &self.figures;
        ThreadFigure {
            name: self.name.clone(),
            role: self.role,
            os_tid: get(&f.os_tid),
            loops: get(&f.loops),
            signals: get(&f.signals),
            sleeps: get(&f.sleeps),
            wakes: get(&f.wakes),
            queue_depth: get(&f.queue_depth),
            sleep_ns: get(&f.sleep_ns),
            spin_ns: get(&f.spin_ns),
            buffer_full_ns: get(&f.buffer_full_ns),
            spin_limit_us: get(&f.spin_limit_us),
            blocks: self.blocks.clone(),
        }
    }

    /// The thread itself, once per round: its totals so far, and how many
    /// signals waited in its queues when the round looked.
    #[inline]
    pub(crate) fn publish_round(&self, loops: u64, signals: u64, queue_depth: u64) {
        let f = &self.figures;
        f.loops.store(loops, Ordering::Relaxed);
        f.signals.store(signals, Ordering::Relaxed);
        f.queue_depth.store(queue_depth, Ordering::Relaxed);
    }

    /// The thread itself, as it goes to sleep: its sleeps so far.
    pub(crate) fn publish_sleeps(&self, sleeps: u64) {
        self.figures.sleeps.store(sleeps, Ordering::Relaxed);
    }

    /// The thread itself, after a sleep: its time asleep so far.
    pub(crate) fn publish_sleep_ns(&self, ns: u64) {
        self.figures.sleep_ns.store(ns, Ordering::Relaxed);
    }

    /// The thread itself, after a spin: its time spinning idle so far.
    pub(crate) fn publish_spin_ns(&self, ns: u64) {
        self.figures.spin_ns.store(ns, Ordering::Relaxed);
    }

    /// The thread itself, when it chooses how long to spin.
    pub(crate) fn publish_spin_limit_us(&self, us: u64) {
        self.figures.spin_limit_us.store(us, Ordering::Relaxed);
    }

    /// The thread itself, once a full queue took its signals: its time
    /// waiting on full queues so far.
    pub(crate) fn publish_buffer_full_ns(&self, ns: u64) {
        self.figures.buffer_full_ns.store(ns, Ordering::Relaxed);
    }
}

impl ThreadShared {
    pub(crate) fn new(name: String, role: ThreadRole, blocks: Vec<BlockRef>) -> ThreadShared {
        ThreadShared {
            name,
            role,
            blocks,
            sleeping: AtomicBool::new(false),
            busy: AtomicBool::new(true),
            progress: AtomicU64::new(0),
            handle: OnceLock::new(),
            poll_waker: OnceLock::new(),
            figures: Figures::default(),
        }
    }

    pub(crate) fn set_poll_waker(&self, waker: Arc<dyn PollWaker>) {
        let set = self.poll_waker.set(waker);
        assert!(set.is_ok(), "thread {} has two pollers", self.name);
    }

    /// Ends a poller's wait (stopping), whether or not it sleeps.
    pub(crate) fn wake_poller(&self) {
        if let Some(waker) = self.poll_waker.get() {
            waker.wake();
        }
    }

    /// Called once on the thread itself, before it first sleeps.
    pub(crate) fn register_current(&self) {
        let registered = self.handle.set(std::thread::current());
        assert!(registered.is_ok(), "thread {} registered twice", self.name);
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        self.figures
            .os_tid
            .store(u64::try_from(tid).unwrap_or(0), Ordering::Relaxed);
    }

    pub(crate) fn publish_progress(&self, progress: u64) {
        self.progress.store(progress, Ordering::Relaxed);
    }

    pub(crate) fn progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// The consumer's half of the protocol up to the re-check: after this,
    /// the caller must look at every incoming queue once more before parking.
    pub(crate) fn prepare_sleep(&self) {
        assert!(
            self.handle.get().is_some(),
            "thread {} sleeps before registering",
            self.name
        );
        self.busy.store(false, Ordering::Release);
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Back from sleep (or from deciding not to): `progress` is the thread's
    /// new progress count, which must differ from the last one published so
    /// the watchdog sees a new busy episode.
    pub(crate) fn end_sleep(&self, progress: u64) {
        self.sleeping.store(false, Ordering::Relaxed);
        self.progress.store(progress, Ordering::Relaxed);
        self.busy.store(true, Ordering::Release);
    }

    /// Marks a thread that will never run again (it ended or panicked), so
    /// the watchdog does not report it as stuck.
    pub(crate) fn mark_gone(&self) {
        self.busy.store(false, Ordering::Release);
    }

    /// Producer side, after the SeqCst fence in [`wake_marked`].
    fn wake_if_sleeping(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            self.figures.wakes.fetch_add(1, Ordering::Relaxed);
            if let Some(waker) = self.poll_waker.get() {
                waker.wake();
            } else if let Some(thread) = self.handle.get() {
                thread.unpark();
            }
        }
    }
}

/// State of the whole runtime, shared by all its threads and feeders.
pub(crate) struct Shared {
    pub(crate) node: NodeId,
    pub(crate) stop: AtomicBool,
    /// Signals dropped because no block of this node has their address.
    pub(crate) dropped_signals: AtomicU64,
    /// Indexed by execution thread.
    pub(crate) threads: Vec<CachePadded<ThreadShared>>,
    /// Each execution thread's last complete [`CpuWindow`], by thread;
    /// `None` until the watchdog has seen a whole window of it. Written
    /// by the watchdog once a window, read by ndbinfo scans.
    pub(crate) cpu: std::sync::Mutex<Vec<Option<CpuWindow>>>,
}

impl Shared {
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub(crate) fn count_dropped(&self) {
        self.dropped_signals.fetch_add(1, Ordering::Relaxed);
    }
}

/// The producer's half of the protocol, once per batch: every thread whose
/// flag in `marked` is set got signals pushed since the last call. Clears
/// the flags.
pub(crate) fn wake_marked(threads: &[CachePadded<ThreadShared>], marked: &mut [bool]) {
    assert_eq!(threads.len(), marked.len());
    if !marked.iter().any(|m| *m) {
        return;
    }
    fence(Ordering::SeqCst);
    for (thread, flag) in threads.iter().zip(marked.iter_mut()) {
        if *flag {
            *flag = false;
            thread.wake_if_sleeping();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_shows_whole_rounded_percentages_of_itself() {
        let w = CpuWindow {
            elapsed_us: 1_000_000,
            os_user_us: 125_000,
            os_system_us: 4_999,
            sleep_us: 700_000,
            spin_us: 100_000,
            buffer_full_us: 5_000,
        };
        assert_eq!(w.percent(w.os_user_us), 13, "12.5 % rounds up");
        assert_eq!(w.percent(w.os_system_us), 0, "0.4999 % rounds down");
        assert_eq!(w.exec_us(), 195_000);
        assert_eq!(w.percent(w.exec_us()), 20);
        assert_eq!(w.percent(2_000_000), 100, "never above the window");
        assert_eq!(CpuWindow::default().percent(5), 0, "an empty window");
    }
}
