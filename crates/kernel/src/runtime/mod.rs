//! The real block runtime: blocks on OS threads by role, as NDB's `ndbmtd`
//! runs them (DESIGN.md §2).
//!
//! [`Runtime::new`] places every block on the layout's thread for its role
//! and instance ([`ThreadLayout::thread_for`]). The threads that host a
//! placed block are the *execution threads*; each runs its blocks one
//! signal at a time (see `execution`). Between every pair of execution
//! threads there is one bounded lock-free SPSC queue per direction, and one
//! from every [`Injector`] (the transport's receive thread, the management
//! session) to every execution thread. Signals for other nodes leave through
//! the sending thread's [`RemoteSender`]; node-level requests (disconnect,
//! shutdown) and watchdog reports go to the node's [`NodeControl`].
//!
//! Not started here: `recv` and `send` threads belong to the transport. The
//! runtime starts the `io` threads (see `io`): file requests of the blocks
//! ([`Context::io`](crate::Context::io)) run there, one thread per `ldm`
//! thread (at least one, at most [`IO_THREADS_MAX`]), so that redo parts
//! sync in parallel and no execution thread waits for a disk. A layout
//! without `recv` threads has an execution thread host the `recv` role
//! (`main`); it then runs a
//! [`Poller`] (the transport's receive loop) itself, between rounds and in
//! place of parking (see `execution`). The runtime does start the watchdog thread
//! (`wd`), which reports execution threads stuck for `watchdog_stuck_ms`.
//!
//! Bounds: every queue holds `queue_capacity_signals`; a thread whose target
//! queue is full stops taking input until it drains. Threads waiting on each
//! other's full queues in a cycle would wait forever — admission control at
//! the entry points (the transaction coordinator refusing work when
//! overloaded) is what keeps queues from filling; see `execution`.

mod affinity;
mod execution;
mod injector;
mod io;
mod os;
mod routing;
mod shared;
pub mod spin;
mod timers;
mod watchdog;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use rtrb::RingBuffer;
use signal::{BlockRef, NodeId, Signal};

pub use affinity::{batch_scheduled, use_batch_scheduling};
pub use injector::Injector;
pub use io::IO_QUEUE_REQUESTS_MAX;
pub use os::{os_thread_figures, OsThreadFigures};
pub use shared::{CpuWindow, ThreadFigure, CPU_WINDOW};

/// Most `io` threads a node starts.
pub const IO_THREADS_MAX: usize = 8;

use crate::block::Block;
use crate::thread_config::{SpinMethod, ThreadLayout, ThreadRole, ThreadSpec};
use crate::time::MonotonicClock;
use execution::{Common, ExecutionThread, PlacedBlock, ThreadParts};
use io::IoQueue;
use routing::{Route, RouteTable};
use shared::{Shared, ThreadShared};
use watchdog::Watchdog;

/// Where signals for other nodes go: one per execution thread, used only by
/// that thread.
pub trait RemoteSender: Send {
    /// Queues `signal` for its receiver's node.
    fn send(&mut self, signal: &Signal);
    /// End of a batch: hand what was queued to the network.
    fn flush(&mut self);
}

/// Input an execution thread takes itself, besides its queues: the
/// transport's receive loop on a node without a receive thread. The thread
/// calls `turn` every few rounds and, with nothing to do, `wait`s in place of
/// parking; other threads end the wait through the [`PollWaker`].
pub trait Poller: Send {
    /// Handles what has arrived, without blocking: typically hands signals
    /// to an [`Injector`] (whose queue into this very thread is one of them).
    /// Must not wait for room in a queue this thread drains: it would wait
    /// forever. Input that does not fit is kept for a later turn.
    fn turn(&mut self);
    /// Blocks until input arrives, the waker is woken or `timeout` passes;
    /// handles nothing (the next `turn` does). A wake that came before the
    /// call must make it return at once.
    fn wait(&mut self, timeout: Duration);
    /// What other threads call to end a `wait`.
    fn waker(&self) -> Arc<dyn PollWaker>;
}

/// Ends a [`Poller::wait`] from any thread; see [`Poller::wait`] for the
/// wake that comes early.
pub trait PollWaker: Send + Sync {
    fn wake(&self);
}

/// Node-level effects blocks ask for, plus watchdog reports. Called rarely
/// (control plane), from execution threads and the watchdog thread.
pub trait NodeControl: Send + Sync {
    /// Close the connection to `node` (a block declared it failed).
    fn disconnect(&self, node: NodeId);
    /// Stop this node process; with `restart`, its angel starts it again.
    fn shutdown(&self, restart: bool, reason: &str);
    /// Stop this node process as failed (`Context::shutdown_failed`): it
    /// ends non-zero and its angel does not start it again. By default a
    /// plain stop.
    fn shutdown_failed(&self, reason: &str) {
        self.shutdown(false, reason);
    }
    /// Execution thread `thread` (of `role`) died: a block broke one of its
    /// invariants. The node must end as a crashed process would (its angel
    /// applies `StopOnError`).
    fn thread_failed(&self, thread: &str, role: ThreadRole, reason: &str);
    /// Execution thread `thread` (of `role`) has been busy without progress
    /// for `stuck_for`.
    fn watchdog_report(&self, thread: &str, role: ThreadRole, stuck_for: Duration);
}

/// A reader of the execution threads' figures ([`Runtime::thread_figures`]).
#[derive(Clone)]
pub struct ThreadFigures {
    shared: Arc<Shared>,
}

impl ThreadFigures {
    /// Every execution thread's figures, in thread order (`thr_no`).
    pub fn snapshot(&self) -> Vec<ThreadFigure> {
        self.shared.threads.iter().map(|t| t.figure()).collect()
    }

    /// Every execution thread's last complete [`CpuWindow`], in thread
    /// order; `None` for a thread not yet seen through a whole window.
    pub fn cpu_windows(&self) -> Vec<Option<CpuWindow>> {
        self.shared
            .cpu
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl std::fmt::Debug for ThreadFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadFigures")
            .field("threads", &self.shared.threads.len())
            .finish()
    }
}

/// A block to run, its address and the role whose threads run it.
pub struct BlockPlacement {
    pub address: BlockRef,
    pub role: ThreadRole,
    pub block: Box<dyn Block>,
}

/// The runtime's bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeLimits {
    /// Capacity of each queue, per (sender, receiver) thread pair and per
    /// (injector, thread) pair.
    pub queue_capacity_signals: usize,
    /// Signals a thread executes from one queue per round before it turns
    /// to the next.
    pub batch_signals_max: usize,
    /// How often the watchdog looks at the threads.
    pub watchdog_interval_ms: u64,
    /// Busy without progress this long is reported (NDB's
    /// `TimeBetweenWatchDogCheck`).
    pub watchdog_stuck_ms: u64,
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        RuntimeLimits {
            queue_capacity_signals: 4096,
            batch_signals_max: 64,
            watchdog_interval_ms: 100,
            watchdog_stuck_ms: 6000,
        }
    }
}

impl RuntimeLimits {
    fn validate(&self) -> Result<(), RuntimeError> {
        let checks: [(&'static str, u64); 4] = [
            ("queue_capacity_signals", self.queue_capacity_signals as u64),
            ("batch_signals_max", self.batch_signals_max as u64),
            ("watchdog_interval_ms", self.watchdog_interval_ms),
            ("watchdog_stuck_ms", self.watchdog_stuck_ms),
        ];
        for (parameter, value) in checks {
            if value == 0 {
                return Err(RuntimeError::InvalidLimit {
                    parameter,
                    value,
                    reason: "must be at least 1",
                });
            }
        }
        Ok(())
    }
}

/// Why a runtime could not be built or started.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("runtime limit {parameter} = {value} is invalid: {reason}")]
    InvalidLimit {
        parameter: &'static str,
        value: u64,
        reason: &'static str,
    },
    #[error("block {address} belongs to node {}, but this runtime runs node {node}", address.node)]
    ForeignBlock { address: BlockRef, node: NodeId },
    #[error("block {address} is placed twice")]
    DuplicateBlock { address: BlockRef },
    #[error("block {address} is placed on role {role}, which runs no blocks (only ldm, tc, main and rep do)")]
    NotAnExecutionRole { address: BlockRef, role: ThreadRole },
    #[error("no thread of the layout hosts role {role}, needed by block {address}")]
    NoThreadForRole { address: BlockRef, role: ThreadRole },
    #[error(
        "no execution thread hosts the recv role, so none can run the receive loop \
         (the layout has recv threads; ThreadConfig recv={{count=0}} puts it on main)"
    )]
    NoPollingThread,
    #[error("a poller is already attached to execution thread {thread}")]
    PollerTwice { thread: String },
    #[error("cannot start thread {thread}: {source}")]
    Spawn {
        thread: String,
        source: std::io::Error,
    },
}

/// A runtime built but not started: blocks placed, queues allocated.
pub struct Runtime {
    shared: Arc<Shared>,
    routes: Arc<RouteTable>,
    /// Indexed by execution thread.
    parts: Vec<ThreadParts>,
    /// The execution thread that hosts the `recv` role, if one does.
    recv_host: Option<usize>,
    watchdog_spec: ThreadSpec,
    /// The layout's `io` thread (its CPU binding), and how many to start.
    io_spec: ThreadSpec,
    io_threads: usize,
    limits: RuntimeLimits,
    clock: MonotonicClock,
}

impl Runtime {
    pub fn new(
        node: NodeId,
        layout: &ThreadLayout,
        blocks: Vec<BlockPlacement>,
        limits: RuntimeLimits,
    ) -> Result<Runtime, RuntimeError> {
        limits.validate()?;
        let mut placed: Vec<(usize, BlockPlacement)> = Vec::with_capacity(blocks.len());
        for placement in blocks {
            let layout_index = layout_thread_of(node, layout, &placement)?;
            placed.push((layout_index, placement));
        }
        // Execution threads in layout order.
        let mut execution_threads: Vec<usize> = placed.iter().map(|(i, _)| *i).collect();
        execution_threads.sort_unstable();
        execution_threads.dedup();
        let threads = execution_threads.len();
        let mut parts: Vec<ThreadParts> = execution_threads
            .iter()
            .map(|layout_index| ThreadParts {
                spec: layout.threads[*layout_index].clone(),
                blocks: Vec::new(),
                incoming: Vec::new(),
                outgoing: (0..threads).map(|_| None).collect(),
                poller: None,
            })
            .collect();
        let recv_host = layout
            .thread_for(ThreadRole::Recv, 0)
            .and_then(|layout_index| execution_threads.binary_search(&layout_index).ok());
        let mut routes = RouteTable::new();
        for (layout_index, placement) in placed {
            let thread = execution_threads
                .binary_search(&layout_index)
                .expect("every placed block's thread is an execution thread");
            let slot = parts[thread].blocks.len();
            let address = placement.address;
            if !routes.insert(address.block, address.instance, Route { thread, slot }) {
                return Err(RuntimeError::DuplicateBlock { address });
            }
            parts[thread].blocks.push(PlacedBlock {
                address,
                block: placement.block,
            });
        }
        for sender in 0..threads {
            for receiver in (0..threads).filter(|r| *r != sender) {
                let (producer, consumer) = RingBuffer::new(limits.queue_capacity_signals);
                parts[sender].outgoing[receiver] = Some(producer);
                parts[receiver].incoming.push(consumer);
            }
        }
        let shared = Shared {
            node,
            stop: Default::default(),
            dropped_signals: Default::default(),
            threads: parts
                .iter()
                .map(|p| {
                    let blocks = p.blocks.iter().map(|b| b.address).collect();
                    CachePadded::new(ThreadShared::new(p.spec.name.clone(), p.spec.role, blocks))
                })
                .collect(),
            cpu: std::sync::Mutex::new(vec![None; parts.len()]),
        };
        Ok(Runtime {
            shared: Arc::new(shared),
            routes: Arc::new(routes),
            parts,
            recv_host,
            watchdog_spec: watchdog_spec(layout),
            io_spec: io_spec(layout),
            io_threads: (layout.count(ThreadRole::Ldm) as usize).clamp(1, IO_THREADS_MAX),
            limits,
            clock: MonotonicClock::new(),
        })
    }

    /// A feeder for a thread outside the runtime (the transport's receive
    /// thread, the mgm session). Each has its own SPSC queue to every
    /// execution thread. Create all injectors before `start`.
    /// Where anyone reads the execution threads' figures (ndbinfo's
    /// `threadstat`), before and after the runtime starts.
    pub fn thread_figures(&self) -> ThreadFigures {
        ThreadFigures {
            shared: Arc::clone(&self.shared),
        }
    }

    pub fn injector(&mut self) -> Injector {
        let mut queues = Vec::with_capacity(self.parts.len());
        for parts in &mut self.parts {
            let (producer, consumer) = RingBuffer::new(self.limits.queue_capacity_signals);
            parts.incoming.push(consumer);
            queues.push(producer);
        }
        Injector::new(Arc::clone(&self.shared), Arc::clone(&self.routes), queues)
    }

    /// Has the execution thread that hosts the `recv` role (ThreadConfig
    /// `recv={count=0}`: `main`) run `poller` (see [`Poller`]). Returns the
    /// thread's name. Attach before `start`.
    pub fn attach_poller(&mut self, poller: Box<dyn Poller>) -> Result<String, RuntimeError> {
        let thread = self.recv_host.ok_or(RuntimeError::NoPollingThread)?;
        let parts = &mut self.parts[thread];
        if parts.poller.is_some() {
            return Err(RuntimeError::PollerTwice {
                thread: parts.spec.name.clone(),
            });
        }
        self.shared.threads[thread].set_poll_waker(poller.waker());
        parts.poller = Some(poller);
        Ok(parts.spec.name.clone())
    }

    /// The clock the blocks will see: feeders that stamp times use it too.
    pub fn clock(&self) -> MonotonicClock {
        self.clock
    }

    /// Starts the execution threads and the watchdog. `remote` is called
    /// once per execution thread, with its index (the order of
    /// [`RunningRuntime::thread_names`]), for that thread's sender to other
    /// nodes. On error, the threads already started are stopped again.
    pub fn start(
        mut self,
        remote: &mut dyn FnMut(usize) -> Box<dyn RemoteSender>,
        control: Arc<dyn NodeControl>,
    ) -> Result<RunningRuntime, RuntimeError> {
        let io_queue = Arc::new(IoQueue::new());
        let io_injectors: Vec<Injector> = (0..self.io_threads).map(|_| self.injector()).collect();
        let common = Common {
            io: Arc::clone(&io_queue),
            shared: Arc::clone(&self.shared),
            routes: Arc::clone(&self.routes),
            clock: self.clock,
            batch_signals_max: self.limits.batch_signals_max,
            local_queue_preallocated_signals: self.limits.queue_capacity_signals,
        };
        let mut running = RunningRuntime {
            shared: Arc::clone(&self.shared),
            execution: Vec::with_capacity(self.parts.len()),
            watchdog: None,
            watchdog_name: self.watchdog_spec.name.clone(),
            io_queue: Arc::clone(&io_queue),
            io: Vec::with_capacity(self.io_threads),
        };
        for (index, parts) in self.parts.into_iter().enumerate() {
            let name = parts.spec.name.clone();
            let thread =
                ExecutionThread::new(index, parts, remote(index), Arc::clone(&control), &common);
            let handle = thread.spawn().map_err(|source| RuntimeError::Spawn {
                thread: name,
                source,
            })?;
            running.execution.push(handle);
        }
        let watchdog = Watchdog {
            shared: Arc::clone(&self.shared),
            control,
            interval: Duration::from_millis(self.limits.watchdog_interval_ms),
            stuck: Duration::from_millis(self.limits.watchdog_stuck_ms),
        };
        let spec = self.watchdog_spec;
        let handle = std::thread::Builder::new()
            .name(spec.name.clone())
            .spawn(move || {
                affinity::apply_to_current_thread(&spec);
                watchdog.run();
            })
            .map_err(|source| RuntimeError::Spawn {
                thread: running.watchdog_name.clone(),
                source,
            })?;
        running.watchdog = Some(handle);
        for (index, injector) in io_injectors.into_iter().enumerate() {
            let name = format!("{}{index}", ThreadRole::Io.config_name());
            let spec = self.io_spec.clone();
            let (queue, shared) = (Arc::clone(&io_queue), Arc::clone(&self.shared));
            let handle = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    affinity::apply_to_current_thread(&spec);
                    io::run_io_thread(queue, shared, injector);
                })
                .map_err(|source| RuntimeError::Spawn {
                    thread: name,
                    source,
                })?;
            running.io.push(handle);
        }
        Ok(running)
    }
}

/// The layout thread that runs `placement`, after checking it can run here.
fn layout_thread_of(
    node: NodeId,
    layout: &ThreadLayout,
    placement: &BlockPlacement,
) -> Result<usize, RuntimeError> {
    let address = placement.address;
    let role = placement.role;
    if address.node != node {
        return Err(RuntimeError::ForeignBlock { address, node });
    }
    if !matches!(
        role,
        ThreadRole::Ldm | ThreadRole::Tc | ThreadRole::Main | ThreadRole::Rep
    ) {
        return Err(RuntimeError::NotAnExecutionRole { address, role });
    }
    let index = layout
        .thread_for(role, u32::from(address.instance))
        .ok_or(RuntimeError::NoThreadForRole { address, role })?;
    assert!(index < layout.threads.len());
    Ok(index)
}

/// The layout's `wd` thread, or a default one when the layout has none.
fn watchdog_spec(layout: &ThreadLayout) -> ThreadSpec {
    layout
        .threads
        .iter()
        .find(|t| t.role == ThreadRole::Watchdog)
        .cloned()
        .unwrap_or_else(|| ThreadSpec {
            name: ThreadRole::Watchdog.config_name().to_string(),
            role: ThreadRole::Watchdog,
            index: 0,
            hosts: vec![ThreadRole::Watchdog],
            cpubind: None,
            cpuset: None,
            realtime: false,
            batch: layout.threads.iter().any(|t| t.batch),
            spintime_us: 0,
            spintime_given: false,
            spin_method: SpinMethod::Static,
        })
}

/// The layout's `io` thread, or a default one when the layout has none of
/// its own (io threads are not execution threads: they bind as the `io`
/// entry says, or not at all).
fn io_spec(layout: &ThreadLayout) -> ThreadSpec {
    layout
        .threads
        .iter()
        .find(|t| t.role == ThreadRole::Io)
        .cloned()
        .unwrap_or_else(|| ThreadSpec {
            name: ThreadRole::Io.config_name().to_string(),
            role: ThreadRole::Io,
            index: 0,
            hosts: vec![ThreadRole::Io],
            cpubind: None,
            cpuset: None,
            realtime: false,
            batch: layout.threads.iter().any(|t| t.batch),
            spintime_us: 0,
            spintime_given: false,
            spin_method: SpinMethod::Static,
        })
}

/// A started runtime. Dropping it stops it too.
pub struct RunningRuntime {
    shared: Arc<Shared>,
    /// Indexed by execution thread; empty once stopped.
    execution: Vec<JoinHandle<()>>,
    watchdog: Option<JoinHandle<()>>,
    watchdog_name: String,
    io_queue: Arc<IoQueue>,
    /// The io threads; empty once stopped.
    io: Vec<JoinHandle<()>>,
}

impl RunningRuntime {
    /// Asks every thread to stop and joins them: no signal is executed after
    /// this returns. A block in the middle of `execute` finishes it first.
    pub fn stop(mut self) {
        self.stop_threads();
    }

    /// The execution threads in index order, then the watchdog thread.
    pub fn thread_names(&self) -> Vec<String> {
        self.shared
            .threads
            .iter()
            .map(|t| t.name.clone())
            .chain(std::iter::once(self.watchdog_name.clone()))
            .collect()
    }

    /// Signals dropped so far because no block of this node has their
    /// receiver's address (or, from an injector, because they were for
    /// another node).
    pub fn dropped_signals(&self) -> u64 {
        self.shared.dropped_signals.load(Ordering::Relaxed)
    }

    fn stop_threads(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.io_queue.stop();
        for handle in self.execution.iter().chain(self.watchdog.iter()) {
            handle.thread().unpark();
        }
        for thread in &self.shared.threads {
            thread.wake_poller();
        }
        let io = std::mem::take(&mut self.io);
        for handle in self
            .execution
            .drain(..)
            .chain(self.watchdog.take())
            .chain(io)
        {
            let name = handle.thread().name().unwrap_or("unnamed").to_string();
            if handle.join().is_err() {
                // The thread's exit guard has logged and reported it already.
                tracing::debug!(thread = %name, "runtime thread had panicked");
            }
        }
    }
}

impl Drop for RunningRuntime {
    fn drop(&mut self) {
        self.stop_threads();
    }
}
