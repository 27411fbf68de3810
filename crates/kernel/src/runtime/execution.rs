//! One execution thread: it runs its blocks' signals one at a time and
//! carries out what they leave in the outbox — signals to blocks on this
//! thread (a local FIFO), on other threads (their SPSC queues), on other
//! nodes (the thread's `RemoteSender`), timers (a heap) and node-level
//! requests (`NodeControl`).
//!
//! A thread works in rounds: due timers, then the local FIFO, then every
//! incoming queue, each source up to `batch_signals_max` signals and
//! `ROUND_SOURCE_OP_BYTES_MAX` bytes of requests' operations, the queue
//! order rotating from round to round so no queue starves. At the end of a
//! round it flushes: remote signals go to the network and the threads that
//! got signals are woken (once per round, not per signal). With nothing to
//! do it spins for `spintime` and then sleeps (see `shared` for why no
//! wake-up is lost).
//!
//! A thread with a [`Poller`] (the receive loop, when the layout has no
//! `recv` thread) turns it before every few rounds (`POLLER_TURN_EVERY_ROUNDS`)
//! and before any round that follows an idle one, so what it received runs
//! in the round after; and it sleeps in the poller's `wait`
//! rather than `park`, so that input from the network wakes it as a signal
//! from another thread does. The poller waits at most until the next timer,
//! so timers fire on time while it waits.
//!
//! # Back-pressure
//!
//! A full queue to another thread does not drop the signal: it waits in a
//! per-target pending list, and the thread takes no new input (no timers,
//! no local FIFO, no queues) until every pending list is empty, retrying
//! with `yield_now` in between. So pending lists never hold more than the
//! outputs of one signal execution. The caveat: threads that wait on each
//! other's full queues in a cycle wait forever (the watchdog then reports
//! them). What keeps queues from filling in the first place is admission
//! control at the entry points — the transaction coordinator refuses new
//! work when it is overloaded — not this mechanism, which only bounds memory.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rtrb::{Consumer, Producer, PushError};
use signal::{BlockRef, NodeId, Signal, SignalBody};

use super::affinity;
use super::routing::{DropLog, RouteTable};
use super::shared::{wake_marked, Shared};
use super::spin::{self, SpinPolicy};
use super::timers::TimerHeap;
use super::{NodeControl, Poller, RemoteSender};
use crate::block::{Block, Context, Output};
use crate::random::Rng;
use crate::thread_config::ThreadSpec;
use crate::time::{Clock, Instant, MonotonicClock};

/// Bytes of operations (`SignalBody::request_payload_len`) a round takes
/// from one source, besides its `batch_signals_max` signals: a round ends,
/// and what it answered leaves, after about this much work, whatever the
/// operations per request. Without it 16 requests of 16 updates each ran in
/// one round and their answers left together, and the client and the data
/// node took turns (each about half idle).
const ROUND_SOURCE_OP_BYTES_MAX: usize = 16 * 1024;

/// The longest a sleeping thread stays parked without a timer or a wake-up,
/// in milliseconds. Only a safety net: wake-ups are not lost.
const SLEEP_MAX_MS: u64 = 1000;

/// A busy thread with a poller turns it once every this many rounds (and
/// whenever a round found nothing to do). Every round cost one `epoll_wait`
/// that mostly found nothing: in a 2-node, 2-replica sandbox on 2 CPUs,
/// turning every 4th round halved the data nodes' system calls per update
/// (1.06-1.12 -> 0.54-0.55) and cut context switches (0.20 -> 0.13-0.16 per
/// update); every 16th saved little more and leaves input waiting longer.
const POLLER_TURN_EVERY_ROUNDS: u32 = 4;

/// Room in the outbox for one execution's outputs before it first grows.
const OUTBOX_PREALLOCATED: usize = 64;

/// A block and its address, on the thread that runs it.
pub(crate) struct PlacedBlock {
    pub(crate) address: BlockRef,
    pub(crate) block: Box<dyn Block>,
}

/// What `Runtime::new` and `Runtime::injector` prepare for one thread.
pub(crate) struct ThreadParts {
    pub(crate) spec: ThreadSpec,
    pub(crate) blocks: Vec<PlacedBlock>,
    /// From every other execution thread, then from every injector.
    pub(crate) incoming: Vec<Consumer<Signal>>,
    /// Indexed by target execution thread; `None` for this thread itself.
    pub(crate) outgoing: Vec<Option<Producer<Signal>>>,
    pub(crate) poller: Option<Box<dyn Poller>>,
}

/// What all execution threads share.
pub(crate) struct Common {
    pub(crate) shared: Arc<Shared>,
    /// Where file requests go (`io`).
    pub(crate) io: Arc<super::io::IoQueue>,
    pub(crate) routes: Arc<RouteTable>,
    pub(crate) clock: MonotonicClock,
    pub(crate) batch_signals_max: usize,
    pub(crate) local_queue_preallocated_signals: usize,
}

pub(crate) struct ExecutionThread {
    index: usize,
    spec: ThreadSpec,
    blocks: Vec<PlacedBlock>,
    incoming: Vec<Consumer<Signal>>,
    poller: Option<Box<dyn Poller>>,
    router: Router,
    /// Reused by every execution: no allocation per signal.
    outbox: Vec<Output>,
    rng: Rng,
    clock: MonotonicClock,
    shared: Arc<Shared>,
    batch_signals_max: usize,
    /// The incoming queue the next round starts with.
    next_queue: usize,
    /// Executed signals plus wake-ups; published for the watchdog.
    progress: u64,
    /// Rounds, signals executed and sleeps since the thread started
    /// (`threadstat`), published once per round and per sleep.
    loops: u64,
    signals: u64,
    sleeps: u64,
    /// Time asleep, spinning idle and held by full queues (`cpustat`), ns.
    sleep_ns: u64,
    spin_ns: u64,
    buffer_full_ns: u64,
    /// The time blocks see: read once per round and once per source queue
    /// with signals, not per signal (a clock read per signal was 2 % of a
    /// busy data node's CPU); a source's batch is short, so blocks' timers
    /// and timeouts stay exact to well under a millisecond.
    now: Instant,
}

impl ExecutionThread {
    pub(crate) fn new(
        index: usize,
        parts: ThreadParts,
        remote: Box<dyn RemoteSender>,
        control: Arc<dyn NodeControl>,
        common: &Common,
    ) -> ExecutionThread {
        let threads = common.shared.threads.len();
        assert!(index < threads);
        assert_eq!(parts.outgoing.len(), threads);
        assert!(
            parts.outgoing[index].is_none(),
            "a thread has no queue to itself"
        );
        assert!(common.batch_signals_max > 0);
        let router = Router {
            me: index,
            node: common.shared.node,
            routes: Arc::clone(&common.routes),
            shared: Arc::clone(&common.shared),
            local: VecDeque::with_capacity(common.local_queue_preallocated_signals),
            outgoing: parts.outgoing,
            pending: (0..threads).map(|_| VecDeque::new()).collect(),
            pending_signals: 0,
            wake: vec![false; threads],
            remote,
            remote_sent: false,
            timers: TimerHeap::new(),
            control,
            io: Arc::clone(&common.io),
            drops: DropLog::new(),
        };
        ExecutionThread {
            index,
            spec: parts.spec,
            blocks: parts.blocks,
            incoming: parts.incoming,
            poller: parts.poller,
            router,
            outbox: Vec::with_capacity(OUTBOX_PREALLOCATED),
            rng: Rng::from_entropy(),
            clock: common.clock,
            shared: Arc::clone(&common.shared),
            batch_signals_max: common.batch_signals_max,
            next_queue: 0,
            progress: 0,
            loops: 0,
            signals: 0,
            sleeps: 0,
            sleep_ns: 0,
            spin_ns: 0,
            buffer_full_ns: 0,
            now: common.clock.now(),
        }
    }

    /// Starts the OS thread, named after the layout's thread.
    pub(crate) fn spawn(self) -> std::io::Result<std::thread::JoinHandle<()>> {
        let guard = ExitGuard {
            shared: Arc::clone(&self.shared),
            control: Arc::clone(&self.router.control),
            index: self.index,
        };
        std::thread::Builder::new()
            .name(self.spec.name.clone())
            .spawn(move || {
                let _guard = guard;
                self.run();
            })
    }

    fn run(mut self) {
        self.shared.threads[self.index].register_current();
        affinity::apply_to_current_thread(&self.spec);
        self.start_blocks();
        self.router.flush();
        let mut spin = SpinPolicy::of_thread(&self.spec);
        let mut published_limit = spin.limit();
        self.shared.threads[self.index].publish_spin_limit_us(published_limit.as_micros() as u64);
        // Since when the thread has been out of work, whether it has slept
        // since, and whether a yield of its spin found the CPU contended
        // (the clock is read only while it spins or measures).
        let mut idle: Option<(std::time::Instant, bool, bool)> = None;
        let mut rounds_since_turn = POLLER_TURN_EVERY_ROUNDS;
        // Since when a full queue to another thread holds this one (the
        // clock is read only at the ends of such a wait).
        let mut full_since: Option<std::time::Instant> = None;
        while !self.shared.stopping() {
            if self.router.has_pending() {
                self.router.retry_pending();
                self.router.flush();
                if self.router.has_pending() {
                    full_since.get_or_insert_with(std::time::Instant::now);
                    std::thread::yield_now();
                    continue;
                }
            }
            if let Some(since) = full_since.take() {
                self.buffer_full_ns += since.elapsed().as_nanos() as u64;
                self.shared.threads[self.index].publish_buffer_full_ns(self.buffer_full_ns);
            }
            if let Some(poller) = self.poller.as_mut() {
                if rounds_since_turn >= POLLER_TURN_EVERY_ROUNDS {
                    poller.turn();
                    rounds_since_turn = 0;
                }
                rounds_since_turn += 1;
            }
            let executed = self.run_round();
            self.router.flush();
            if executed > 0 {
                if let Some((since, slept, contended)) = idle.take() {
                    if !slept {
                        self.add_spin(since);
                    }
                    spin.record(since.elapsed(), slept, contended);
                    if spin.limit() != published_limit {
                        published_limit = spin.limit();
                        self.shared.threads[self.index]
                            .publish_spin_limit_us(published_limit.as_micros() as u64);
                    }
                }
                continue;
            }
            // Idle: the next round turns (after the wait, if it sleeps),
            // whatever the count, so that a spinning thread polls too.
            rounds_since_turn = POLLER_TURN_EVERY_ROUNDS;
            let limit = spin.limit();
            // Neither spinning nor measuring, going idle reads no clock: two
            // clock reads per idle round were 2 % of a busy data node's CPU.
            if limit.is_zero() && !spin.measures() {
                self.sleep();
                continue;
            }
            let (since, slept, contended) =
                idle.get_or_insert_with(|| (std::time::Instant::now(), false, false));
            if !*slept && since.elapsed() < limit {
                // Spinning keeps the thread awake for work that comes soon
                // (a client's next request: no wake-up on its path), but
                // must not keep a CPU from another runnable thread, such as
                // a client on the same small machine: yield while spinning,
                // and note when the yield gave the CPU away.
                *contended |= spin::yield_contended();
                continue;
            }
            if !*slept {
                let (since, contended) = (*since, *contended);
                if !limit.is_zero() {
                    self.add_spin(since);
                }
                idle = Some((since, true, contended));
            }
            self.sleep();
        }
    }

    /// Counts a spin that began at `since` and ends now.
    fn add_spin(&mut self, since: std::time::Instant) {
        self.spin_ns += since.elapsed().as_nanos() as u64;
        self.shared.threads[self.index].publish_spin_ns(self.spin_ns);
    }

    /// `Block::start` of every block, on this thread, before any signal.
    fn start_blocks(&mut self) {
        for slot in 0..self.blocks.len() {
            let placed = &mut self.blocks[slot];
            let mut ctx = Context::new(
                self.clock.now(),
                placed.address,
                &mut self.outbox,
                &mut self.rng,
            );
            placed.block.start(&mut ctx);
            for output in self.outbox.drain(..) {
                self.router.dispatch(output);
            }
        }
    }

    /// One round over every source; returns how many signals ran. Returns
    /// early when a target queue filled up (back-pressure).
    fn run_round(&mut self) -> usize {
        let queues = self.incoming.len();
        let first_queue = self.next_queue;
        if queues > 0 {
            self.next_queue = (self.next_queue + 1) % queues;
        }
        let now = self.clock.now();
        self.now = now;
        // Signals waiting as the round begins, for `threadstat`: the local
        // FIFO now, each queue as the loop below first looks at it.
        let mut queue_depth = self.router.local.len();
        let executed = self.run_sources(now, first_queue, &mut queue_depth);
        self.loops += 1;
        self.signals += executed as u64;
        self.shared.threads[self.index].publish_round(self.loops, self.signals, queue_depth as u64);
        executed
    }

    /// `run_round`'s work: timers, the local FIFO, then every queue from
    /// `first_queue` on; adds what each queue held to `queue_depth`.
    fn run_sources(&mut self, now: Instant, first_queue: usize, queue_depth: &mut usize) -> usize {
        let queues = self.incoming.len();
        let mut executed = 0;
        while executed < self.batch_signals_max && !self.router.has_pending() {
            let Some(due) = self.router.timers.pop_due(now) else {
                break;
            };
            let address = self.blocks[due.slot].address;
            let timeout = Signal {
                receiver: address,
                sender: address,
                body: SignalBody::Timeout {
                    timer_id: due.timer_id,
                },
            };
            self.execute(due.slot, timeout);
            executed += 1;
        }
        // Only what was queued before the round: a block that keeps sending
        // to itself must not starve the other queues.
        let local_budget = self.router.local.len().min(self.batch_signals_max);
        let mut bytes = 0;
        for _ in 0..local_budget {
            if self.router.has_pending() || bytes >= ROUND_SOURCE_OP_BYTES_MAX {
                return executed;
            }
            let Some((slot, signal)) = self.router.local.pop_front() else {
                break;
            };
            bytes += signal.body.request_payload_len();
            self.execute(slot, signal);
            executed += 1;
        }
        for k in 0..queues {
            let queue = (first_queue + k) % queues;
            let waiting = self.incoming[queue].slots();
            *queue_depth += waiting;
            if waiting > 0 {
                self.now = self.clock.now();
            }
            let mut bytes = 0;
            for _ in 0..self.batch_signals_max {
                if self.router.has_pending() {
                    return executed;
                }
                if bytes >= ROUND_SOURCE_OP_BYTES_MAX {
                    break;
                }
                let Ok(signal) = self.incoming[queue].pop() else {
                    break;
                };
                bytes += signal.body.request_payload_len();
                self.execute_routed(signal);
                executed += 1;
            }
        }
        executed
    }

    /// Executes a signal that the router (or an injector) placed on this thread.
    fn execute_routed(&mut self, signal: Signal) {
        let route = self.router.routes.get(signal.receiver);
        let slot = match route {
            Some(route) if route.thread == self.index => route.slot,
            _ => panic!(
                "thread {} got signal {} for {}, which is not one of its blocks",
                self.spec.name,
                signal.body.name(),
                signal.receiver
            ),
        };
        self.execute(slot, signal);
    }

    fn execute(&mut self, slot: usize, signal: Signal) {
        let placed = &mut self.blocks[slot];
        assert_eq!(placed.address, signal.receiver);
        let mut ctx = Context::new(self.now, placed.address, &mut self.outbox, &mut self.rng);
        placed.block.execute(signal, &mut ctx);
        self.progress += 1;
        self.shared.threads[self.index].publish_progress(self.progress);
        for output in self.outbox.drain(..) {
            self.router.dispatch(output);
        }
    }

    fn has_input(&self) -> bool {
        !self.router.local.is_empty() || self.incoming.iter().any(|queue| !queue.is_empty())
    }

    /// Parks (or waits in the poller) until woken, the next timer, or `SLEEP_MAX_MS`.
    fn sleep(&mut self) {
        let sleep_max = Duration::from_millis(SLEEP_MAX_MS);
        let timeout = match self.router.timers.next_deadline() {
            Some(at) => at.saturating_since(self.clock.now()).min(sleep_max),
            None => sleep_max,
        };
        if timeout.is_zero() {
            return;
        }
        let me = &self.shared.threads[self.index];
        self.sleeps += 1;
        me.publish_sleeps(self.sleeps);
        me.prepare_sleep();
        // The re-check of the protocol in `shared`: after `prepare_sleep`'s fence.
        if !self.has_input() && !self.shared.stopping() {
            // Two clock reads per sleep, beside the system call it costs.
            let began = std::time::Instant::now();
            match self.poller.as_mut() {
                // Waits only: what arrived is handled by the next round's
                // turn, after `end_sleep`, so handing it to this thread's own
                // queue does not wake this thread a second time.
                Some(poller) => poller.wait(timeout),
                None => std::thread::park_timeout(timeout),
            }
            self.sleep_ns += began.elapsed().as_nanos() as u64;
            me.publish_sleep_ns(self.sleep_ns);
        }
        self.progress += 1;
        me.end_sleep(self.progress);
    }
}

/// Carries out a thread's outputs. Apart from the blocks so that an
/// execution can borrow a block and the router at the same time.
struct Router {
    me: usize,
    node: NodeId,
    routes: Arc<RouteTable>,
    shared: Arc<Shared>,
    /// Signals between blocks of this thread, in send order, with the
    /// receiver's slot (routed once, when sent).
    local: VecDeque<(usize, Signal)>,
    outgoing: Vec<Option<Producer<Signal>>>,
    /// Per target thread: signals its full queue did not take yet, in order.
    pending: Vec<VecDeque<Signal>>,
    pending_signals: usize,
    /// Threads that got signals since the last flush.
    wake: Vec<bool>,
    remote: Box<dyn RemoteSender>,
    /// Whether `remote` got signals since its last flush.
    remote_sent: bool,
    timers: TimerHeap,
    control: Arc<dyn NodeControl>,
    io: Arc<super::io::IoQueue>,
    drops: DropLog,
}

impl Router {
    fn has_pending(&self) -> bool {
        self.pending_signals > 0
    }

    fn dispatch(&mut self, output: Output) {
        match output {
            Output::Send(signal) => self.send(signal),
            Output::Timer {
                block,
                at,
                timer_id,
            } => match self.local_route(block) {
                Some(route) if route.thread == self.me => {
                    self.timers.set(at, route.slot, timer_id);
                }
                _ => {
                    let what = format!("timer {timer_id}");
                    let name = &self.shared.threads[self.me].name;
                    self.drops.note(&self.shared, name, &what, block, block);
                }
            },
            Output::Disconnect(node) => self.control.disconnect(node),
            Output::Shutdown {
                failed: true,
                reason,
                ..
            } => self.control.shutdown_failed(&reason),
            Output::Shutdown {
                restart, reason, ..
            } => self.control.shutdown(restart, &reason),
            Output::Io(request) => self.io.submit(request),
        }
    }

    fn local_route(&self, address: BlockRef) -> Option<super::routing::Route> {
        if address.node != self.node {
            return None;
        }
        self.routes.get(address)
    }

    fn send(&mut self, signal: Signal) {
        if signal.receiver.node != self.node {
            self.remote.send(&signal);
            self.remote_sent = true;
            // Encoded: its payload is for this thread's blocks to fill again.
            if let Some(payload) = signal.body.into_payload() {
                signal::buffers::keep(payload);
            }
            return;
        }
        let Some(route) = self.routes.get(signal.receiver) else {
            let name = &self.shared.threads[self.me].name;
            self.drops.note(
                &self.shared,
                name,
                signal.body.name(),
                signal.sender,
                signal.receiver,
            );
            return;
        };
        if route.thread == self.me {
            self.local.push_back((route.slot, signal));
            return;
        }
        let target = route.thread;
        self.wake[target] = true;
        // Behind signals already pending for this target: order per pair holds.
        if self.pending[target].is_empty() {
            let Some(producer) = self.outgoing[target].as_mut() else {
                unreachable!("every other thread has a queue from this one");
            };
            match producer.push(signal) {
                Ok(()) => return,
                Err(PushError::Full(signal)) => self.pending[target].push_back(signal),
            }
        } else {
            self.pending[target].push_back(signal);
        }
        self.pending_signals += 1;
    }

    /// Moves what fits from the pending lists into their queues.
    fn retry_pending(&mut self) {
        for target in 0..self.pending.len() {
            if self.pending[target].is_empty() {
                continue;
            }
            // Wake the target even if nothing moves: it must drain its queue.
            self.wake[target] = true;
            let Some(producer) = self.outgoing[target].as_mut() else {
                unreachable!("signals are pending only for other threads");
            };
            while let Some(signal) = self.pending[target].pop_front() {
                if let Err(PushError::Full(signal)) = producer.push(signal) {
                    self.pending[target].push_front(signal);
                    break;
                }
                self.pending_signals -= 1;
            }
        }
        assert_eq!(
            self.pending_signals,
            self.pending.iter().map(VecDeque::len).sum::<usize>()
        );
    }

    /// End of a round: hand remote signals to the network, wake the threads
    /// that got signals.
    fn flush(&mut self) {
        if self.remote_sent {
            self.remote.flush();
            self.remote_sent = false;
        }
        wake_marked(&self.shared.threads, &mut self.wake);
    }
}

/// Runs when an execution thread ends, normally or by a panic. A panic in a
/// block means its state can no longer be trusted, and a node with a dead
/// thread cannot serve: the node is asked to shut down.
struct ExitGuard {
    shared: Arc<Shared>,
    control: Arc<dyn NodeControl>,
    index: usize,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let thread = &self.shared.threads[self.index];
        thread.mark_gone();
        if std::thread::panicking() {
            let reason = format!(
                "execution thread {} ({}) panicked",
                thread.name, thread.role
            );
            tracing::error!(thread = %thread.name, role = %thread.role, "execution thread panicked; shutting the node down");
            self.control
                .thread_failed(&thread.name, thread.role, &reason);
        }
    }
}
