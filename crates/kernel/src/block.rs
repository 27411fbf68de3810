//! Blocks: single-threaded state machines that own their state and talk only
//! by signals. A block never reaches the clock, randomness, the network or
//! the disk by itself: it gets them through its [`Context`], which the real
//! runtime and the simulator fill in. That is what lets the same block code
//! run on threads in production and step by step under a seed in tests.

use std::time::Duration;

use signal::{BlockRef, NodeId, Signal, SignalBody};

use crate::random::Rng;
use crate::time::Instant;

/// A block instance. `execute` must not block, sleep or do I/O: it reacts to
/// one signal and returns, leaving its effects in the context's outbox.
pub trait Block: AsAny + Send + 'static {
    /// Called once, before the first signal, when the runtime starts.
    fn start(&mut self, _ctx: &mut Context<'_>) {}

    fn execute(&mut self, signal: Signal, ctx: &mut Context<'_>);

    /// Panics, naming what broke, when the block's state contradicts
    /// itself (a leaked record, a count that disagrees with the records it
    /// counts). The simulator calls it after every `start` and `execute`
    /// in debug builds; the real runtime never does, so it may cost
    /// O(records in use), not more. The default checks nothing.
    fn check_invariants(&self) {}
}

/// The work of a file request: runs on one of the node's `io` threads (in
/// the simulator: between two steps, at a time the seed chooses), never on
/// the thread of the block that asked. `Err` says what failed, in words.
pub type IoJob = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// A file request a block hands to its node's `io` threads (NDB: a request
/// to NDBFS): `job` runs there and the block receives
/// `FsConf { request, error }` once it has. Requests of one block may
/// complete in any order (several `io` threads; the simulator's seed
/// picks): a block that needs an order issues the next request after the
/// previous one's `FsConf`. A request of a node that crashes may never run.
pub struct IoRequest {
    /// Who gets the `FsConf`.
    pub block: BlockRef,
    /// The block's own number for the request, echoed in the `FsConf`.
    pub request: u64,
    pub job: IoJob,
}

impl std::fmt::Debug for IoRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoRequest")
            .field("block", &self.block)
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

impl IoRequest {
    /// Runs the job (on the calling thread: an `io` thread, or the
    /// simulator between steps) and returns the `FsConf` for the block.
    pub fn run(self) -> Signal {
        let error = match (self.job)() {
            Ok(()) => String::new(),
            Err(error) => {
                assert!(!error.is_empty(), "an I/O error says what failed");
                error
            }
        };
        Signal {
            receiver: self.block,
            sender: BlockRef::new(self.block.node, signal::BlockNumber::FILE_SYSTEM, 0),
            body: SignalBody::FsConf {
                request: self.request,
                error,
            },
        }
    }
}

/// An effect a block asks its runtime for.
#[derive(Debug)]
pub enum Output {
    /// Deliver a signal (to this node or another).
    Send(Signal),
    /// Deliver `Timeout { timer_id }` to `block` at `at` (or later).
    Timer {
        block: BlockRef,
        at: Instant,
        timer_id: u32,
    },
    /// Close the connection to `node` (it was declared failed).
    Disconnect(NodeId),
    /// Stop this node process. With `restart`, its angel starts it again.
    /// With `failed` (never with `restart`), the stop is a failure the
    /// node cannot get past by itself: the process ends non-zero and its
    /// angel does not start it again.
    Shutdown {
        restart: bool,
        failed: bool,
        reason: String,
    },
    /// Run a file request off this thread ([`IoRequest`]).
    Io(IoRequest),
}

/// Lets tests and the simulator look at a block's state by its concrete type.
pub trait AsAny {
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: std::any::Any> AsAny for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// What a block sees of the world while it executes one signal.
pub struct Context<'a> {
    now: Instant,
    me: BlockRef,
    outbox: &'a mut Vec<Output>,
    rng: &'a mut Rng,
    /// The run's buggify salt when the simulator turned buggify on for this
    /// run; `None` (always, in the real runtime): every buggify point is off.
    buggify: Option<u64>,
    /// The buggify points that fired in this execution, for the
    /// simulator's trace (empty, never allocated, in the real runtime).
    fired: Vec<&'static std::panic::Location<'static>>,
}

/// Share (percent) of buggify points active in one run. As in FoundationDB,
/// a point is on or off for a whole run (decided by the run's salt and the
/// point's place in the source), so a run that hammers one rare branch
/// leaves others alone and the common paths still get exercised.
pub const BUGGIFY_POINT_ACTIVE_PERCENT: u64 = 50;

/// How often an active point fires when it names no rate (FoundationDB's
/// `BUGGIFY`: 25 %).
pub const BUGGIFY_FIRE_PPM: u32 = 250_000;

/// Whether the buggify point at `site` is active in the run salted `salt`:
/// FNV-1a of the salt, file, line and column.
fn buggify_point_active(salt: u64, site: &std::panic::Location<'_>) -> bool {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = salt
        .to_le_bytes()
        .into_iter()
        .chain(site.file().bytes())
        .chain(site.line().to_le_bytes())
        .chain(site.column().to_le_bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // The high bits: FNV's low bits mix poorly.
    (hash >> 32) % 100 < BUGGIFY_POINT_ACTIVE_PERCENT
}

impl<'a> Context<'a> {
    /// Made by a runtime for one execution of one block.
    #[inline]
    pub fn new(now: Instant, me: BlockRef, outbox: &'a mut Vec<Output>, rng: &'a mut Rng) -> Self {
        Context {
            now,
            me,
            outbox,
            rng,
            buggify: None,
            fired: Vec::new(),
        }
    }

    /// The buggify points that fired in this execution so far.
    pub fn buggify_fired(&self) -> &[&'static std::panic::Location<'static>] {
        &self.fired
    }

    /// Turns buggify on for this execution (the simulator, for a run that
    /// asked for it): points are active or not by `salt`, fixed per run.
    /// The real runtime never calls this.
    pub fn with_buggify(mut self, salt: Option<u64>) -> Self {
        self.buggify = salt;
        self
    }

    /// FoundationDB's `BUGGIFY`: true, now and then, at a rare branch that a
    /// block should take more often under test than the machine makes it
    /// (a full redo log, a request limit, a failing write), so the seed
    /// explores it. Always false in the real runtime, and in a simulation
    /// without buggify, and then costs one branch and no randomness.
    /// Fires [`BUGGIFY_FIRE_PPM`] of the time where active.
    #[inline]
    #[track_caller]
    pub fn buggify(&mut self) -> bool {
        self.buggify_ppm(BUGGIFY_FIRE_PPM)
    }

    /// [`Context::buggify`] firing `ppm` parts per million of the calls at
    /// an active point (for points on a hot path, where 25 % would starve
    /// the common branch).
    #[inline]
    #[track_caller]
    pub fn buggify_ppm(&mut self, ppm: u32) -> bool {
        let Some(salt) = self.buggify else {
            return false;
        };
        let site = std::panic::Location::caller();
        let fires = buggify_point_active(salt, site) && self.rng.chance(u64::from(ppm), 1_000_000);
        if fires {
            self.fired.push(site);
        }
        fires
    }

    /// An empty buffer for a signal's byte payload: one this thread kept
    /// (`signal::buffers`) from a payload it sent or consumed when it has
    /// one, so that a busy thread's result batches reuse memory instead of
    /// allocating and freeing a buffer per request.
    #[inline]
    pub fn buffer(&mut self) -> Vec<u8> {
        signal::buffers::take()
    }

    /// Gives back the payload of a signal this block consumed (a request's
    /// op batch it is done with), for [`Context::buffer`] and the decoder
    /// of received signals to fill again.
    #[inline]
    pub fn recycle(&mut self, payload: Vec<u8>) {
        signal::buffers::keep(payload);
    }

    #[inline]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The address of the executing block.
    #[inline]
    pub fn me(&self) -> BlockRef {
        self.me
    }

    pub fn node(&self) -> NodeId {
        self.me.node
    }

    #[inline]
    pub fn send(&mut self, receiver: BlockRef, body: SignalBody) {
        self.outbox.push(Output::Send(Signal {
            receiver,
            sender: self.me,
            body,
        }));
    }

    /// Sets a one-shot timer; the block receives `Timeout { timer_id }`.
    /// Timers cannot be cancelled: a block ignores the ones it no longer wants.
    pub fn set_timer(&mut self, after: Duration, timer_id: u32) {
        self.outbox.push(Output::Timer {
            block: self.me,
            at: self.now + after,
            timer_id,
        });
    }

    /// Hands a file request to the node's `io` threads: `job` runs there,
    /// and this block receives `FsConf { request, error }` when it is done
    /// (see [`IoRequest`]). The way to fsync without stalling the thread.
    pub fn io(&mut self, request: u64, job: IoJob) {
        self.outbox.push(Output::Io(IoRequest {
            block: self.me,
            request,
            job,
        }));
    }

    pub fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    pub fn disconnect(&mut self, node: NodeId) {
        self.outbox.push(Output::Disconnect(node));
    }

    pub fn shutdown(&mut self, restart: bool, reason: impl Into<String>) {
        self.outbox.push(Output::Shutdown {
            restart,
            failed: false,
            reason: reason.into(),
        });
    }

    /// Stops this node process as failed: a fault that a restart would
    /// meet again (corrupt or unwritable files at start), for an operator
    /// to resolve. The process ends non-zero and is not started again.
    pub fn shutdown_failed(&mut self, reason: impl Into<String>) {
        self.outbox.push(Output::Shutdown {
            restart: false,
            failed: true,
            reason: reason.into(),
        });
    }
}
