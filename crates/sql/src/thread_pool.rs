//! The thread pool (`thread_handling=pool-of-threads`, MariaDB's name):
//! connections share a few threads instead of holding one each.
//!
//! Connections are split over `thread_pool_size` thread groups. Each
//! group has one epoll set, a queue, its workers and a watchdog thread. A
//! connection whose client is idle costs no thread: its socket waits in
//! the group's epoll set. Every free worker of the group waits in
//! `epoll_wait` for one event; the kernel wakes one of them when a client
//! sends a command, and that worker serves the command itself and puts
//! the task back among the waiting ones.
//!
//! A socket joins the set once, edge-triggered: parking a task after each
//! command costs no `epoll_ctl` (a one-shot registration needs one per
//! command to re-arm, a syscall per statement). What that asks for: an
//! edge reported while its task is away (running, queued) is remembered
//! (`Parked::missed`) and sends the task round again when it parks; and a
//! task parks without looking at its socket only when its last read took
//! everything the socket held ([`Task::drained`]), since input that was
//! already there when it stopped reading makes no new edge. (MariaDB's pool has one listener that
//! queues events for other workers; a statement then costs a hand-over
//! between threads, which on a SQL node, whose statements are short and
//! mostly wait for the data nodes, cost a third of the context switches.)
//!
//! Like MySQL's and MariaDB's pools (seed 004), a group normally runs one
//! statement at a time — here `1 + THREAD_POOL_OVERSUBSCRIBE`, because a
//! statement of a SQL node mostly waits for the data nodes rather than
//! using its CPU — and queues the rest:
//! - a connection whose transaction is already started is queued ahead of
//!   the others ("started transactions first"): it holds row locks that
//!   others wait for, and ending it frees them;
//! - a worker that has run one statement for longer than
//!   `thread_pool_stall_limit` no longer counts, so a long statement
//!   (or one waiting for a lock) lets the group start another worker; the
//!   watchdog looks for stalls every stall limit, and when no worker
//!   listens it moves the input that waits into the queue;
//! - a queued task wakes a listening worker through the group's kick
//!   eventfd (in the epoll set, one-shot), or starts a worker;
//! - at most `thread_pool_max_threads` workers over all groups; a worker
//!   idle for `THREAD_POOL_IDLE_TIMEOUT_MS` ends (one stays per group).
//!
//! - a listening worker whose last batch started something takes up to
//!   [`POOL_BATCH_TASKS_MAX`] connections from one `epoll_wait` and serves
//!   them as a batch ([`Task::begin`], [`Task::send`], [`Task::finish`]):
//!   what they started goes out together (a SQL node sends their key
//!   reads in one write) and each finishes in turn; one whose batch
//!   started nothing takes one connection at a time. Queued tasks go the
//!   same way: up to [`POOL_BATCH_TASKS_MAX`] of them as one batch while
//!   the group's batches are wide, one at a time otherwise.
//! - while the group's batches are wide, one free worker listens and the
//!   others rest on a condition variable: input that comes while a batch
//!   is served gathers for the next batch instead of waking another
//!   worker for one or two connections. (With every free worker
//!   listening, `oltp_point_select` at 32 threads made batches of 3-5
//!   reads and 0.7 involuntary context switches per query in the SQL
//!   node.) A batch's reads wait for no lock, so its worker is back
//!   soon; a worker about to run anything else (which may wait for a
//!   lock) first wakes a rester to listen, and a queued task wakes one
//!   as it would start a worker.
//!
//! The pool knows nothing of MySQL: it runs [`Task`]s. Linux only (epoll).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Statements a group runs at once beyond the first (MariaDB's
/// `thread_pool_oversubscribe` default).
pub const THREAD_POOL_OVERSUBSCRIBE: usize = 3;
/// Statements a group runs at once before its stall limit.
pub const GROUP_STATEMENTS_MAX: usize = 1 + THREAD_POOL_OVERSUBSCRIBE;
/// MariaDB's `thread_pool_stall_limit` default, in ms.
pub const THREAD_POOL_STALL_LIMIT_MS_DEFAULT: u64 = 500;
/// The smallest stall limit, in ms (MariaDB's `thread_pool_stall_limit`
/// lower bound).
pub const THREAD_POOL_STALL_LIMIT_MS_MIN: u64 = 1;
/// MariaDB's `thread_pool_max_threads` default.
pub const THREAD_POOL_MAX_THREADS_DEFAULT: usize = 65_536;
/// Most thread groups (MariaDB's `thread_pool_size` upper bound).
pub const THREAD_POOL_SIZE_MAX: usize = 256;
/// How long a worker with nothing to do waits before it ends, in ms
/// (MariaDB's `thread_pool_idle_timeout` default, 60 s).
pub const THREAD_POOL_IDLE_TIMEOUT_MS: u64 = 60_000;
/// Events one `epoll_wait` returns at most.
const EVENTS_PER_WAIT: usize = 256;
/// Connections a listening worker takes from one `epoll_wait` and serves
/// as one batch (their key reads go to the data nodes in one write). With
/// one listener per group while batches are wide, 16 capped the batches
/// at 1,024 connections (`bench/connections.sh`: about 48k qps at 1,024
/// and 4,096 connections against 75-88k and 49-60k with 64).
pub const POOL_BATCH_TASKS_MAX: usize = 64;

/// One connection as the pool runs it.
pub trait Task: Send + 'static {
    /// The socket it waits on while its client is idle.
    fn fd(&self) -> RawFd;
    /// Serves what the client sent (the login, or one command), on a
    /// worker; may block (reading the rest of a packet, writing a large
    /// result, running the statement).
    fn run(&mut self) -> Next;
    /// Whether a transaction is open: such a connection is queued first.
    fn in_transaction(&self) -> bool;

    /// Whether nothing the client sent is left unread: the task's last
    /// read from its socket came back short (it took all the socket held)
    /// and nothing is buffered. False makes the pool look at the socket
    /// (a non-blocking peek) before it parks the task: input that was
    /// already there makes no new edge.
    fn drained(&self) -> bool {
        false
    }

    /// Starts serving what the client sent as one of a batch (see the
    /// module doc): true when taken, to be completed by [`Task::finish`]
    /// after [`Task::send`]; false leaves it to [`Task::run`]. Must not
    /// block beyond one read of a socket known to be readable.
    fn begin(&mut self) -> bool {
        false
    }

    /// Sends what the tasks of a batch that [`Task::begin`] took left to
    /// send, together.
    fn send(_batch: &[Self])
    where
        Self: Sized,
    {
    }

    /// Completes a task [`Task::begin`] took (its requests sent); what to
    /// do next, as for [`Task::run`].
    fn finish(&mut self) -> Next {
        Next::Wait
    }
}

/// What a task is to do after [`Task::run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait until its socket has input.
    Wait,
    /// Run again at once (input is already buffered).
    Ready,
    /// Over: the task is dropped.
    Done,
}

/// How the pool is sized.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Thread groups (`thread_pool_size`).
    pub groups: usize,
    /// Most workers over all groups (`thread_pool_max_threads`).
    pub max_threads: usize,
    /// After how long a running statement lets its group start another
    /// worker (`thread_pool_stall_limit`).
    pub stall_limit: Duration,
    /// Stack of a worker, in bytes.
    pub stack_bytes: usize,
}

/// What every group shares.
struct Shared {
    options: PoolOptions,
    /// Workers over all groups.
    threads: AtomicUsize,
    closing: AtomicBool,
}

/// A thread pool (see the module doc). Dropping it lets its threads end
/// once idle.
pub struct ThreadPool<T: Task> {
    groups: Vec<Arc<Group<T>>>,
    shared: Arc<Shared>,
    next: AtomicUsize,
}

struct Group<T: Task> {
    index: usize,
    shared: Arc<Shared>,
    epoll: OwnedFd,
    state: Mutex<State<T>>,
    /// Where resting workers wait.
    rest: Condvar,
    /// An eventfd in the epoll set (one-shot, token [`KICK`]): a write
    /// wakes one listening worker for a queued task.
    kick: OwnedFd,
    /// Tasks whose sockets wait in the epoll set, and the sockets there.
    waiting: Mutex<Parked<T>>,
    next_worker: AtomicU64,
}

struct State<T> {
    /// Tasks with a transaction open.
    high: VecDeque<T>,
    low: VecDeque<T>,
    /// This group's workers.
    threads: usize,
    /// Listening workers kicked for a queued task and not yet awake.
    permits: usize,
    /// Workers started and not yet looking for work.
    starting: usize,
    /// Running workers: id and since when.
    running: Vec<(u64, Instant)>,
    /// Workers waiting in `epoll_wait` on the group's set.
    listening: usize,
    /// Free workers waiting on [`Group::rest`] instead (see [`Group::work`]).
    resting: usize,
    /// Resting workers notified and not yet awake.
    woken: usize,
    /// The group's last batch started something ([`Listener::wide`]).
    wide: bool,
    /// Workers serving a batch taken while the group's batches were wide.
    batching: usize,
    /// Tasks whose input the watchdog found with no worker listening.
    rescued: u64,
}

impl<T> State<T> {
    fn queued(&self) -> usize {
        self.high.len() + self.low.len()
    }

    /// Workers running a statement for less than the stall limit.
    fn unstalled(&self, now: Instant, stall_limit: Duration) -> usize {
        self.running
            .iter()
            .filter(|(_, since)| now.saturating_duration_since(*since) < stall_limit)
            .count()
    }

    fn may_start(&self, now: Instant, stall_limit: Duration) -> bool {
        self.unstalled(now, stall_limit) < GROUP_STATEMENTS_MAX
    }

    fn pop(&mut self) -> Option<T> {
        self.high.pop_front().or_else(|| self.low.pop_front())
    }
}

impl<T: Task> State<T> {
    /// Queues `task`: first among equals when its transaction is open.
    fn push(&mut self, task: T) {
        if task.in_transaction() {
            self.high.push_back(task);
        } else {
            self.low.push_back(task);
        }
    }
}

impl<T: Task> ThreadPool<T> {
    /// A pool of `options.groups` groups, each with its watchdog thread
    /// started; workers start as work comes.
    pub fn start(options: PoolOptions) -> io::Result<ThreadPool<T>> {
        let groups = options.groups.clamp(1, THREAD_POOL_SIZE_MAX);
        let shared = Arc::new(Shared {
            options,
            threads: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
        });
        let mut list = Vec::with_capacity(groups);
        for index in 0..groups {
            // SAFETY: epoll_create1 takes no pointers; a valid result is
            // a descriptor we own from here on.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: fd is a fresh descriptor nobody else owns.
            let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
            let kick = kick_fd(&epoll)?;
            let group = Arc::new(Group {
                index,
                shared: Arc::clone(&shared),
                epoll,
                state: Mutex::new(State {
                    high: VecDeque::new(),
                    low: VecDeque::new(),
                    threads: 0,
                    permits: 0,
                    starting: 0,
                    running: Vec::new(),
                    listening: 0,
                    resting: 0,
                    woken: 0,
                    wide: false,
                    batching: 0,
                    rescued: 0,
                }),
                rest: Condvar::new(),
                kick,
                waiting: Mutex::new(Parked::default()),
                next_worker: AtomicU64::new(0),
            });
            let watchdog = Arc::clone(&group);
            thread::Builder::new()
                .name(format!("sql-watch-{index}"))
                .stack_size(WATCHDOG_STACK_BYTES)
                .spawn(move || watchdog.watch())?;
            list.push(group);
        }
        Ok(ThreadPool {
            groups: list,
            shared,
            next: AtomicUsize::new(0),
        })
    }

    /// Queues a new task (a connection to log in) on the next group,
    /// round-robin.
    pub fn submit(&self, task: T) {
        self.submit_to(self.next_group(), task);
    }

    /// The group the next new task goes to, round-robin (for a caller
    /// that prepares the task for its group: [`ThreadPool::submit_to`]).
    pub fn next_group(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.groups.len()
    }

    /// Queues a new task on group `at` (modulo the groups).
    pub fn submit_to(&self, at: usize, task: T) {
        let group = &self.groups[at % self.groups.len()];
        let mut state = group.lock();
        group.enqueue(&mut state, task);
    }

    /// Workers now, over all groups.
    pub fn threads(&self) -> usize {
        self.shared.threads.load(Ordering::Relaxed)
    }

    /// Tasks running now, over all groups.
    #[cfg(test)]
    fn running(&self) -> usize {
        self.groups.iter().map(|g| g.lock().running.len()).sum()
    }

    /// Tasks whose input the watchdog found with no worker listening,
    /// over all groups.
    #[cfg(test)]
    fn rescued(&self) -> u64 {
        self.groups.iter().map(|g| g.lock().rescued).sum()
    }

    /// Free workers resting, over all groups.
    #[cfg(test)]
    fn resting(&self) -> usize {
        self.groups.iter().map(|g| g.lock().resting).sum()
    }

    /// Connections whose client is idle (no thread of their own).
    pub fn waiting(&self) -> usize {
        self.groups.iter().map(|g| g.parked().tasks.len()).sum()
    }
}

impl<T: Task> Drop for ThreadPool<T> {
    fn drop(&mut self) {
        // Workers see it when their `epoll_wait` slice ends.
        self.shared.closing.store(true, Ordering::Release);
    }
}

/// Stack of a watchdog thread, in bytes: it only moves tasks.
const WATCHDOG_STACK_BYTES: usize = 128 << 10;
/// How long a thread whose `epoll_wait` failed waits before the next, in
/// ms (a failure that repeats must not spin).
const EPOLL_ERROR_PAUSE_MS: u64 = 100;

impl<T: Task> Group<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn parked(&self) -> MutexGuard<'_, Parked<T>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `task` and gets a worker to it.
    fn enqueue(self: &Arc<Self>, state: &mut State<T>, task: T) {
        state.push(task);
        self.wake(state);
    }

    /// Wakes idle workers, or starts some, while work is queued and the
    /// group may run more than it runs now.
    fn wake(self: &Arc<Self>, state: &mut State<T>) {
        while self.wake_one(state) {}
    }

    /// Wakes or starts one worker if the group wants one; false if not.
    fn wake_one(self: &Arc<Self>, state: &mut State<T>) -> bool {
        let now = Instant::now();
        // Workers already on their way count as running.
        let coming = state.permits + state.starting + state.woken;
        let running = state.unstalled(now, self.shared.options.stall_limit) + coming;
        if state.queued() <= coming || running >= GROUP_STATEMENTS_MAX {
            return false;
        }
        if state.listening > state.permits {
            state.permits += 1;
            self.kick();
            return true;
        }
        self.wake_rester(state) || self.start_worker(state)
    }

    /// Starts a worker for this group unless `thread_pool_max_threads`
    /// are running (a group always may have one); false if none started.
    fn start_worker(self: &Arc<Self>, state: &mut State<T>) -> bool {
        let shared = &self.shared;
        let threads = shared.threads.fetch_add(1, Ordering::AcqRel);
        if threads >= shared.options.max_threads.max(1) && state.threads > 0 {
            shared.threads.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        let worker = Arc::clone(self);
        let id = self.next_worker.fetch_add(1, Ordering::Relaxed);
        let spawned = thread::Builder::new()
            .name(format!("sql-pool-{}", self.index))
            .stack_size(shared.options.stack_bytes)
            .spawn(move || worker.work(id));
        match spawned {
            Ok(_) => {
                state.threads += 1;
                state.starting += 1;
                true
            }
            Err(error) => {
                shared.threads.fetch_sub(1, Ordering::AcqRel);
                tracing::error!(group = self.index, "cannot start a pool worker: {error}");
                false
            }
        }
    }

    /// A worker: runs queued tasks while the group may; otherwise waits in
    /// `epoll_wait` on the group's set for one connection with input and
    /// runs it.
    ///
    /// Every free worker listens (MariaDB's pool has one listener that
    /// hands events to others): the kernel wakes one of them per
    /// connection with input, so at load a statement costs no hand-over
    /// from one thread to another, as with a thread per connection. The
    /// queue holds what cannot run at once (a full group, a new
    /// connection, input already read), in priority order.
    fn work(self: Arc<Self>, id: u64) {
        let stall_limit = self.shared.options.stall_limit;
        let idle_timeout = Duration::from_millis(THREAD_POOL_IDLE_TIMEOUT_MS);
        let slice_ms = i32::try_from(stall_limit.as_millis())
            .unwrap_or(i32::MAX)
            .max(1);
        let mut listener = Listener::new();
        let mut state = self.lock();
        state.starting -= 1;
        let mut worked = Instant::now();
        loop {
            let now = Instant::now();
            if state.queued() > 0 && state.may_start(now, stall_limit) {
                // While batches are wide, queued connections (input that
                // came before they were parked, a full group's) go as one
                // batch too, in queue order.
                let max = if state.wide { POOL_BATCH_TASKS_MAX } else { 1 };
                while listener.ready.len() < max {
                    let Some(task) = state.pop() else { break };
                    listener.ready.push(task);
                }
                state.running.push((id, now));
                let counted = state.wide && listener.ready.len() > 1;
                state.batching += usize::from(counted);
                drop(state);
                state = if listener.ready.len() == 1 {
                    let task = listener.ready.pop().expect("one task");
                    self.serve(task, id)
                } else {
                    self.serve_batch(&mut listener, id, counted)
                };
                worked = Instant::now();
                continue;
            }
            if self.shared.closing.load(Ordering::Acquire) {
                break;
            }
            if now.saturating_duration_since(worked) >= idle_timeout && state.threads > 1 {
                break;
            }
            // While the group's batches are wide, one worker listens and
            // the others rest: input that comes while the listener serves
            // a batch gathers for its next one (more statements per write
            // to the data nodes, fewer wake-ups) instead of waking another
            // free worker for one or two connections. A batch's reads wait
            // for no lock, so its worker is back soon; a worker about to
            // run anything else first wakes a rester to listen in its
            // place (`keep_listening`).
            if state.wide && (state.listening > 0 || state.batching > 0) {
                state.resting += 1;
                let (back, _) = self
                    .rest
                    .wait_timeout(state, stall_limit)
                    .unwrap_or_else(|p| p.into_inner());
                state = back;
                state.resting -= 1;
                // A rester that timed out may take another's wake-up: one
                // worker counted as coming too few, for a moment.
                state.woken = state.woken.saturating_sub(1);
                continue;
            }
            state.listening += 1;
            drop(state);
            // Several connections at a time only while batches pay: a
            // worker whose last batch started nothing (writes, scans)
            // takes one, as before, rather than queue the others for
            // other workers (a hand-over each).
            let max = if listener.wide {
                POOL_BATCH_TASKS_MAX
            } else {
                1
            };
            self.take_ready(&mut listener, slice_ms, max, true);
            state = self.lock();
            state.listening -= 1;
            if listener.kicked {
                listener.kicked = false;
                state.permits = state.permits.saturating_sub(1);
            }
            if listener.ready.is_empty() {
                continue;
            }
            let now = Instant::now();
            if state.queued() == 0 && state.may_start(now, stall_limit) {
                state.running.push((id, now));
                let counted = state.wide;
                state.batching += usize::from(counted);
                drop(state);
                state = self.serve_batch(&mut listener, id, counted);
                worked = Instant::now();
                continue;
            }
            // The group is full (or others wait first): queued in order.
            for task in listener.ready.drain(..) {
                state.push(task);
            }
        }
        state.threads -= 1;
        self.shared.threads.fetch_sub(1, Ordering::AcqRel);
    }

    /// Runs `task` (already counted in `running` under `id`), puts it
    /// back where its next step says, and returns the state locked again.
    ///
    /// A task [`Task::begin`] takes is served as a batch of one: a key read
    /// that waited in the queue (its group was busy, or its input came
    /// before it was parked) goes the same way as one that came through
    /// `epoll_wait`.
    fn serve(self: &Arc<Self>, mut task: T, id: u64) -> MutexGuard<'_, State<T>> {
        let next = match caught(|| task.begin()) {
            Some(true) => {
                if caught(|| T::send(std::slice::from_ref(&task))).is_none() {
                    tracing::error!("sending the reads of a pooled connection panicked");
                }
                caught(|| task.finish()).unwrap_or(Next::Done)
            }
            Some(false) => {
                self.keep_listening(false);
                run_caught(&mut task)
            }
            None => Next::Done,
        };
        let again = self.after(task, next);
        let mut state = self.lock();
        state.running.retain(|(worker, _)| *worker != id);
        // This worker looks for work next: no one to wake.
        if let Some(task) = again {
            state.push(task);
        }
        state
    }

    /// Serves the tasks one `epoll_wait` gave (counted in `running` under
    /// `id` as one statement) as a batch: each task that
    /// [`Task::begin`] takes starts, [`Task::send`] sends what they all
    /// prepared at once, and each finishes in turn (the first to wait for
    /// the data nodes receives everybody's replies). Of the others, the
    /// first runs here after the batch and the rest are queued for other
    /// workers. Returns the state locked again.
    fn serve_batch(
        self: &Arc<Self>,
        listener: &mut Listener<T>,
        id: u64,
        counted: bool,
    ) -> MutexGuard<'_, State<T>> {
        let mut later: Option<T> = None;
        let mut queued = Vec::new();
        for mut task in listener.ready.drain(..) {
            match caught(|| task.begin()) {
                Some(true) => listener.taken.push(task),
                Some(false) if later.is_none() => later = Some(task),
                Some(false) => queued.push(task),
                None => self.close(task),
            }
        }
        listener.wide = !listener.taken.is_empty();
        if !queued.is_empty() {
            let mut state = self.lock();
            for task in queued {
                self.enqueue(&mut state, task);
            }
        }
        if !listener.taken.is_empty() && caught(|| T::send(&listener.taken)).is_none() {
            tracing::error!("sending a batch of pooled connections panicked");
        }
        let mut again = Vec::new();
        for mut task in listener.taken.drain(..) {
            let next = caught(|| task.finish()).unwrap_or(Next::Done);
            again.extend(self.after(task, next));
        }
        let mut counted = counted;
        if let Some(mut task) = later {
            // The batch is over: no longer a reason for others to rest.
            self.keep_listening(std::mem::take(&mut counted));
            let next = run_caught(&mut task);
            again.extend(self.after(task, next));
        }
        let mut state = self.lock();
        state.running.retain(|(worker, _)| *worker != id);
        end_batch(&mut state, counted);
        state.wide = listener.wide;
        for task in again {
            state.push(task);
        }
        state
    }

    /// Before a worker runs a statement that may wait long (anything but
    /// a batch's reads, which wait for no lock): a resting worker listens
    /// in its place when none listens, so the group's other connections
    /// are not left waiting behind it.
    /// `batch_done`: the worker's batch, counted in `batching`, is over.
    fn keep_listening(&self, batch_done: bool) {
        let mut state = self.lock();
        end_batch(&mut state, batch_done);
        if state.listening == 0 {
            self.wake_rester(&mut state);
        }
    }

    /// Wakes a resting worker not already woken; false if there is none.
    fn wake_rester(&self, state: &mut State<T>) -> bool {
        if state.resting <= state.woken {
            return false;
        }
        state.woken += 1;
        self.rest.notify_one();
        true
    }

    /// Where a task goes after a step: back into the epoll set, into the
    /// queue (returned), or away.
    fn after(&self, task: T, next: Next) -> Option<T> {
        match next {
            Next::Wait => self.park(task),
            Next::Ready => Some(task),
            Next::Done => {
                self.close(task);
                None
            }
        }
    }

    /// Drops a task that is over.
    fn close(&self, task: T) {
        self.forget(task.fd());
        drop(task);
    }

    /// Wakes one listening worker (through the kick eventfd).
    fn kick(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes we own to our eventfd. It fails only when
        // the counter would overflow, which a wake-up does not need.
        unsafe { libc::write(self.kick.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// One `epoll_wait` of at most `timeout_ms` (0: do not block) for at
    /// most `max` events; the tasks whose sockets have input go to
    /// `listener.ready`. A kick is taken (`listener.kicked`) when
    /// `take_kick`, else passed on.
    fn take_ready(&self, listener: &mut Listener<T>, timeout_ms: i32, max: usize, take_kick: bool) {
        let max = max.clamp(1, EVENTS_PER_WAIT);
        // SAFETY: the buffer holds EVENTS_PER_WAIT >= max events we own.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                listener.events.as_mut_ptr(),
                max as i32,
                timeout_ms,
            )
        };
        if n < 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                tracing::error!(group = self.index, "epoll_wait: {error}");
                thread::sleep(Duration::from_millis(EPOLL_ERROR_PAUSE_MS));
            }
            return;
        }
        let events = &listener.events[..n as usize];
        if events.iter().any(|event| event.u64 == KICK) {
            let kicks = self.rearm_kick();
            if take_kick && kicks > 0 {
                listener.kicked = true;
                if kicks > 1 {
                    self.pass_kicks(kicks - 1);
                }
            } else if kicks > 0 {
                self.pass_kicks(kicks);
            }
        }
        if events.iter().all(|event| event.u64 == KICK) {
            return;
        }
        let mut parked = self.parked();
        for event in events {
            let token = event.u64;
            if token == KICK {
                continue;
            }
            let fd = token as RawFd;
            let flags = event.events;
            if let Some(task) = parked.tasks.remove(&fd) {
                // The client closed (or its socket failed). A close that
                // came with the command's bytes makes no edge of its own
                // after the task's short read of them: the task must look
                // at its socket again when it parks, or its session (and
                // any transaction's locks) stays until `wait_timeout`.
                if flags & CLOSED_EVENTS != 0 {
                    parked.missed.insert(fd);
                }
                listener.ready.push(task);
            } else if parked.registered.contains(&fd) {
                // Its task runs or is queued: the input may have come
                // after its last read, and the edge will not come again.
                parked.missed.insert(fd);
            }
        }
    }

    /// Reads (and so clears) the kick counter and arms the eventfd again:
    /// the kicks there were.
    fn rearm_kick(&self) -> u64 {
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into a buffer we own from our non-blocking
        // eventfd; EAGAIN (another took them) leaves it zero.
        let read = unsafe { libc::read(self.kick.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        let kicks = if read == 8 {
            u64::from_ne_bytes(count)
        } else {
            0
        };
        // Armed after the read: a kick written in between finds the
        // counter non-zero when EPOLL_CTL_MOD looks, and wakes another.
        arm_kick(
            self.epoll.as_raw_fd(),
            self.kick.as_raw_fd(),
            libc::EPOLL_CTL_MOD,
        );
        kicks
    }

    /// Hands kicks this thread does not take to other listeners.
    fn pass_kicks(&self, kicks: u64) {
        let bytes = kicks.to_ne_bytes();
        // SAFETY: as in `kick`.
        unsafe { libc::write(self.kick.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    }

    /// Parks `task` until its socket has input; the task back when it has
    /// some already (to be served at once) or cannot be watched (it is
    /// then served as if ready, and fails on its socket).
    fn park(&self, task: T) -> Option<T> {
        let fd = task.fd();
        let mut parked = self.parked();
        let missed = parked.missed.remove(&fd);
        if (missed || !task.drained()) && has_input(fd) {
            return Some(task);
        }
        // Into the map before the socket joins the set: a listening
        // worker may see it ready at once.
        parked.tasks.insert(fd, task);
        if parked.registered.contains(&fd) {
            return None;
        }
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: fd as u64,
        };
        // SAFETY: epoll_ctl reads the event we own; the fds are open.
        let added =
            unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        if added != 0 {
            let error = io::Error::last_os_error();
            tracing::warn!(
                group = self.index,
                "cannot wait on a client socket: {error}"
            );
            return parked.tasks.remove(&fd);
        }
        parked.registered.insert(fd);
        None
    }

    /// Takes a socket out of the epoll set before its task is dropped: a
    /// second handle of the socket (`KILL`'s) would keep it registered.
    fn forget(&self, fd: RawFd) {
        let mut parked = self.parked();
        parked.missed.remove(&fd);
        if !parked.registered.remove(&fd) {
            return;
        }
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: epoll_ctl reads the event we own; a socket never added
        // only gets ENOENT.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut event) };
    }

    /// The watchdog: every stall limit, gets a worker to a group whose
    /// workers all ran past it while work waits. When no worker listens
    /// (every one runs a statement), it takes the input that waits in the
    /// epoll set into the queue first, so that the stall rule sees it.
    fn watch(self: Arc<Self>) {
        let tick = self.shared.options.stall_limit;
        let mut listener = Listener::new();
        loop {
            thread::sleep(tick);
            if self.shared.closing.load(Ordering::Acquire) {
                return;
            }
            if self.lock().listening == 0 {
                self.take_ready(&mut listener, 0, EVENTS_PER_WAIT, false);
            }
            let mut state = self.lock();
            state.rescued += listener.ready.len() as u64;
            for task in listener.ready.drain(..) {
                state.push(task);
            }
            // A kick written for a worker that was leaving `epoll_wait`
            // (still counted as listening) waits in the eventfd for the
            // next listener. With none listening, its permit would count
            // as a worker on its way, and `wake` would start none until a
            // statement ends (seconds behind a long one). A listener that
            // takes such a kick later finds nothing: one wake too many.
            if state.listening == 0 {
                state.permits = 0;
            }
            // Workers that ran past the stall limit no longer count:
            // start one for what waits.
            self.wake(&mut state);
        }
    }
}

/// The sockets of a group's epoll set (a socket's token is its fd).
struct Parked<T> {
    /// Tasks waiting for input, by socket.
    tasks: foldhash::HashMap<RawFd, T>,
    /// Sockets in the epoll set (edge-triggered), parked or not: a socket
    /// joins once and leaves when its task is closed.
    registered: foldhash::HashSet<RawFd>,
    /// Sockets whose edge came while their task was away.
    missed: foldhash::HashSet<RawFd>,
}

impl<T> Default for Parked<T> {
    fn default() -> Parked<T> {
        Parked {
            tasks: Default::default(),
            registered: Default::default(),
            missed: Default::default(),
        }
    }
}

/// Whether `fd` has input to read, or has ended or failed (what its task
/// must see): a non-blocking peek.
fn has_input(fd: RawFd) -> bool {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads at most one byte into a byte we own; MSG_PEEK
        // leaves it in the socket.
        let n = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return true;
        }
        match io::Error::last_os_error().kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return false,
            _ => return true,
        }
    }
}

/// What a thread needs to take input from a group's epoll set, allocated
/// once per thread.
struct Listener<T> {
    events: Vec<libc::epoll_event>,
    /// Tasks whose sockets had input, on their way to the queue.
    ready: Vec<T>,
    /// The tasks of a batch that [`Task::begin`] took.
    taken: Vec<T>,
    /// The last batch took a task: the next wait takes several.
    wide: bool,
    /// The last `epoll_wait` took a kick.
    kicked: bool,
}

impl<T> Listener<T> {
    fn new() -> Listener<T> {
        Listener {
            events: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_PER_WAIT],
            ready: Vec::with_capacity(EVENTS_PER_WAIT),
            taken: Vec::with_capacity(POOL_BATCH_TASKS_MAX),
            wide: false,
            kicked: false,
        }
    }
}

/// The epoll token of a group's kick eventfd (task tokens count up from 0).
const KICK: u64 = u64::MAX;
/// The epoll flags of a client's close or a failed socket.
const CLOSED_EVENTS: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;

/// A group's kick eventfd, armed in `epoll`.
fn kick_fd(epoll: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a valid result is ours.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let kick = unsafe { OwnedFd::from_raw_fd(fd) };
    if !arm_kick(epoll.as_raw_fd(), kick.as_raw_fd(), libc::EPOLL_CTL_ADD) {
        return Err(io::Error::last_os_error());
    }
    Ok(kick)
}

/// Arms the kick eventfd (one-shot: one listener wakes per arming).
fn arm_kick(epoll: RawFd, kick: RawFd, op: libc::c_int) -> bool {
    let mut event = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
        u64: KICK,
    };
    // SAFETY: epoll_ctl reads the event we own; both fds are open.
    unsafe { libc::epoll_ctl(epoll, op, kick, &mut event) == 0 }
}

/// A batch counted in `batching` (`counted`) is over. Each is counted once
/// and ended once: a count left behind would make the group's free
/// workers rest with no batch to come back from.
fn end_batch<T>(state: &mut State<T>, counted: bool) {
    if counted {
        assert!(state.batching > 0, "a batch ended that was not counted");
        state.batching -= 1;
    }
}

/// Runs a task; a panic ends that task only.
fn run_caught<T: Task>(task: &mut T) -> Next {
    caught(|| task.run()).unwrap_or(Next::Done)
}

/// Runs a step of a task; None when it panicked (the task is to close).
fn caught<R>(step: impl FnOnce() -> R) -> Option<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)) {
        Ok(value) => Some(value),
        Err(_) => {
            tracing::error!("a pooled connection panicked; it is closed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;

    const WAIT: Duration = Duration::from_secs(10);

    /// Waits (at most [`WAIT`]) until `done` holds; the assertion after
    /// it says what did not.
    fn wait_until(mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done() && Instant::now() < deadline {
            thread::yield_now();
        }
    }

    /// Waits (at most [`WAIT`]) until the group runs all the statements
    /// it may and no worker listens.
    fn wait_every_worker_runs(group: &Group<Echo>) {
        wait_until(|| {
            let state = group.lock();
            state.running.len() == GROUP_STATEMENTS_MAX && state.listening == 0
        });
    }

    fn options(groups: usize, stall_ms: u64) -> PoolOptions {
        PoolOptions {
            groups,
            max_threads: 64,
            stall_limit: Duration::from_millis(stall_ms),
            stack_bytes: 256 << 10,
        }
    }

    /// Reads a byte per run and reports it; ends when its peer closes.
    struct Echo {
        socket: UnixStream,
        name: &'static str,
        in_tx: bool,
        /// Blocks each run until a message comes.
        gate: Option<mpsc::Receiver<()>>,
        seen: mpsc::Sender<(&'static str, u8)>,
        /// Takes part in batches: `begin` reads the byte, `send` notes
        /// the batch's size here, `finish` reports the byte.
        batches: Option<Arc<Mutex<Vec<usize>>>>,
        byte: u8,
        /// Says it read all its socket held (reading a byte at a time, it
        /// cannot know): the pool then parks it without a look.
        claims_drained: bool,
        /// Blocks each `finish`, after its report, until a message comes.
        hold: Option<mpsc::Receiver<()>>,
    }

    impl Task for Echo {
        fn fd(&self) -> RawFd {
            self.socket.as_raw_fd()
        }
        fn run(&mut self) -> Next {
            if let Some(gate) = &self.gate {
                let _ = gate.recv();
            }
            let mut byte = [0u8];
            match self.socket.read(&mut byte) {
                Ok(1) => {
                    let _ = self.seen.send((self.name, byte[0]));
                    Next::Wait
                }
                _ => Next::Done,
            }
        }
        fn in_transaction(&self) -> bool {
            self.in_tx
        }
        fn drained(&self) -> bool {
            self.claims_drained
        }
        fn begin(&mut self) -> bool {
            if self.batches.is_none() {
                return false;
            }
            let mut byte = [0u8];
            self.byte = match self.socket.read(&mut byte) {
                Ok(1) => byte[0],
                _ => u8::MAX,
            };
            true
        }
        fn send(batch: &[Echo]) {
            let sizes = batch[0].batches.as_ref().expect("a batching task");
            sizes.lock().expect("not poisoned").push(batch.len());
        }
        fn finish(&mut self) -> Next {
            let _ = self.seen.send((self.name, self.byte));
            if let Some(hold) = &self.hold {
                let _ = hold.recv();
            }
            Next::Wait
        }
    }

    fn echo(
        name: &'static str,
        in_tx: bool,
        seen: &mpsc::Sender<(&'static str, u8)>,
    ) -> (Echo, UnixStream) {
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        let task = Echo {
            socket: ours,
            name,
            in_tx,
            gate: None,
            seen: seen.clone(),
            batches: None,
            byte: 0,
            claims_drained: false,
            hold: None,
        };
        (task, theirs)
    }

    /// Fills a group with tasks that block until their gate opens: the
    /// gates and the tasks' client ends.
    fn fill_group(
        pool: &ThreadPool<Echo>,
        name: &'static str,
        seen: &mpsc::Sender<(&'static str, u8)>,
    ) -> (Vec<mpsc::Sender<()>>, Vec<UnixStream>) {
        let mut gates = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..=THREAD_POOL_OVERSUBSCRIBE {
            let (mut task, mut client) = echo(name, false, seen);
            let (open, gate) = mpsc::channel();
            task.gate = Some(gate);
            client.write_all(&[0]).expect("write");
            pool.submit(task);
            gates.push(open);
            clients.push(client);
        }
        (gates, clients)
    }

    /// An idle task holds no thread; input wakes a listening worker for
    /// it, again and again.
    #[test]
    fn a_listening_worker_serves_a_task_each_time_its_socket_has_input() {
        let pool = ThreadPool::start(options(1, 500)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (task, mut client) = echo("a", false, &seen_tx);
        client.write_all(&[1]).expect("write");
        pool.submit(task);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("a", 1)));
        for byte in 2..5 {
            client.write_all(&[byte]).expect("write");
            assert_eq!(seen.recv_timeout(WAIT), Ok(("a", byte)));
        }
        // The task reports its byte before it goes back to the epoll set.
        let settled = |wanted: usize| {
            let deadline = Instant::now() + WAIT;
            while pool.waiting() != wanted && Instant::now() < deadline {
                thread::yield_now();
            }
            pool.waiting()
        };
        assert_eq!(settled(1), 1, "the idle task waits in the epoll set");
        drop(client);
        assert_eq!(settled(0), 0, "a closed socket ends its task");
    }

    /// Input that comes while its task runs is served: its edge, taken by
    /// another listener, is remembered, and the task goes round again
    /// when it parks (the socket is edge-triggered: that input makes no
    /// edge later, and the task says it read everything).
    #[test]
    fn input_that_comes_while_its_task_runs_is_not_lost() {
        let pool = ThreadPool::start(options(1, 60_000)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (mut task, mut client) = echo("a", false, &seen_tx);
        task.claims_drained = true;
        let (open, gate) = mpsc::channel();
        task.gate = Some(gate);
        client.write_all(&[0]).expect("write");
        pool.submit(task);
        open.send(()).expect("open");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("a", 0)));
        wait_until(|| pool.waiting() > 0);
        assert_eq!(pool.waiting(), 1, "the task waits in the epoll set");
        client.write_all(&[1]).expect("write");
        wait_until(|| pool.running() > 0);
        assert_eq!(pool.running(), 1, "the gated task runs");
        // A second worker, which listens once it served this one.
        let (other, mut other_client) = echo("other", false, &seen_tx);
        other_client.write_all(&[9]).expect("write");
        pool.submit(other);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("other", 9)));
        let group = &pool.groups[0];
        wait_until(|| group.lock().listening > 0);
        assert_eq!(group.lock().listening, 1, "the second worker listens");
        client.write_all(&[2]).expect("write");
        wait_until(|| !group.parked().missed.is_empty());
        assert_eq!(group.parked().missed.len(), 1, "the listener saw the edge");
        open.send(()).expect("open");
        open.send(()).expect("open");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("a", 1)));
        assert_eq!(seen.recv_timeout(WAIT), Ok(("a", 2)));
    }

    /// A task that cannot say it read everything (it reads a byte per
    /// run) is looked at before it parks: two bytes in one write, one
    /// edge, are both served.
    #[test]
    fn input_left_in_the_socket_is_served_before_the_task_parks() {
        let pool = ThreadPool::start(options(1, 60_000)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (task, mut client) = echo("a", false, &seen_tx);
        client.write_all(&[0]).expect("write");
        pool.submit(task);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("a", 0)));
        client.write_all(&[1, 2]).expect("write");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("a", 1)));
        assert_eq!(seen.recv_timeout(WAIT), Ok(("a", 2)));
    }

    /// A task queued while the group's one worker listens (a new
    /// connection) reaches that worker through the kick: no second
    /// worker starts, and the listener serves both.
    #[test]
    fn a_queued_task_kicks_the_listening_worker() {
        let pool = ThreadPool::start(options(1, 60_000)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (first, mut first_client) = echo("first", false, &seen_tx);
        first_client.write_all(&[1]).expect("write");
        pool.submit(first);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("first", 1)));
        let deadline = Instant::now() + WAIT;
        while pool.groups[0].lock().listening == 0 && Instant::now() < deadline {
            thread::yield_now();
        }
        assert_eq!(pool.groups[0].lock().listening, 1, "the worker listens");
        let (second, mut second_client) = echo("second", false, &seen_tx);
        second_client.write_all(&[2]).expect("write");
        pool.submit(second);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("second", 2)));
        first_client.write_all(&[3]).expect("write");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("first", 3)));
        assert_eq!(pool.threads(), 1, "the listener served the queued task");
    }

    /// Input on several connections while the worker is busy is served
    /// as one batch when it next listens (once a batch has paid): one
    /// `send` for all the tasks that took part; one that does not is run
    /// after the batch.
    #[test]
    fn input_on_several_connections_is_served_as_one_batch() {
        const BATCHED: usize = 5;
        let mut one_thread = options(1, 60_000);
        one_thread.max_threads = 1;
        let pool = ThreadPool::start(one_thread).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let mut clients = Vec::new();
        for at in 0..=BATCHED {
            // The last one does not take part.
            let name = if at == BATCHED { "plain" } else { "batched" };
            let (mut task, mut client) = echo(name, false, &seen_tx);
            if at < BATCHED {
                task.batches = Some(Arc::clone(&sizes));
            }
            client.write_all(&[0]).expect("write");
            pool.submit(task);
            clients.push(client);
        }
        for _ in 0..=BATCHED {
            assert!(seen.recv_timeout(WAIT).is_ok(), "each task's first run");
        }
        let deadline = Instant::now() + WAIT;
        while pool.waiting() < BATCHED + 1 && Instant::now() < deadline {
            thread::yield_now();
        }
        assert_eq!(pool.waiting(), BATCHED + 1, "all idle in the epoll set");
        // A first batch of one: the worker takes several at a time from
        // now on.
        clients[0].write_all(&[0]).expect("write");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("batched", 0)));
        let deadline = Instant::now() + WAIT;
        while pool.waiting() < BATCHED + 1 && Instant::now() < deadline {
            thread::yield_now();
        }
        // The one worker runs a task that waits for its gate meanwhile.
        let (mut busy, mut busy_client) = echo("busy", false, &seen_tx);
        let (open, gate) = mpsc::channel();
        busy.gate = Some(gate);
        busy_client.write_all(&[0]).expect("write");
        pool.submit(busy);
        let deadline = Instant::now() + WAIT;
        while pool.running() == 0 && Instant::now() < deadline {
            thread::yield_now();
        }
        assert_eq!(pool.running(), 1, "the worker runs the gated task");
        for (at, client) in clients.iter_mut().enumerate() {
            client.write_all(&[at as u8 + 1]).expect("write");
        }
        open.send(()).expect("open");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("busy", 0)));
        let mut got = Vec::new();
        for _ in 0..=BATCHED {
            got.push(seen.recv_timeout(WAIT).expect("served"));
        }
        got.sort();
        let mut wanted: Vec<_> = (0..BATCHED).map(|at| ("batched", at as u8 + 1)).collect();
        wanted.push(("plain", BATCHED as u8 + 1));
        wanted.sort();
        assert_eq!(got, wanted);
        // Each first run came from the queue, a batch of one; then the
        // batch of one from `epoll_wait`, then the wide one.
        let mut wanted_sizes = vec![1; BATCHED + 1];
        wanted_sizes.push(BATCHED);
        assert_eq!(*sizes.lock().expect("not poisoned"), wanted_sizes);
        assert_eq!(pool.threads(), 1);
    }

    /// While a group's batches are wide, its free workers rest and one
    /// listens: input on several connections that comes while a batch is
    /// served waits for that worker's next batch, one batch for all,
    /// instead of a free worker taking each connection (as every free
    /// worker listening did).
    #[test]
    fn while_batches_are_wide_input_gathers_for_the_next_batch() {
        const BATCHED: usize = 5;
        // Listeners see that batches are wide when their `epoll_wait`
        // (a stall limit long) ends; the watchdog, once a stall limit,
        // could queue part of the input that comes while the batch is
        // held (a few microseconds here).
        let pool = ThreadPool::start(options(1, 300)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        // Several workers: a full group's worth of gated statements.
        let (gates, plain) = fill_group(&pool, "plain", &seen_tx);
        let workers = pool.threads();
        assert!(workers > 1, "the group started {workers} workers");
        for gate in &gates {
            gate.send(()).expect("open");
        }
        for _ in 0..gates.len() {
            assert_eq!(seen.recv_timeout(WAIT), Ok(("plain", 0)));
        }
        // Batching tasks, idle in the epoll set after a first run each.
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let (mut held, mut held_client) = echo("held", false, &seen_tx);
        held.batches = Some(Arc::clone(&sizes));
        let (release, hold) = mpsc::channel();
        held.hold = Some(hold);
        let mut clients = Vec::new();
        let mut tasks = vec![held];
        for _ in 0..BATCHED {
            let (mut task, client) = echo("batched", false, &seen_tx);
            task.batches = Some(Arc::clone(&sizes));
            tasks.push(task);
            clients.push(client);
        }
        release.send(()).expect("release");
        held_client.write_all(&[0]).expect("write");
        for client in &mut clients {
            client.write_all(&[0]).expect("write");
        }
        for task in tasks {
            pool.submit(task);
        }
        for _ in 0..=BATCHED {
            assert!(seen.recv_timeout(WAIT).is_ok(), "each task's first run");
        }
        wait_until(|| pool.waiting() == BATCHED + 1 + plain.len());
        // A batch from `epoll_wait` makes the group's batches wide; then
        // every free worker but one rests.
        release.send(()).expect("release");
        held_client.write_all(&[1]).expect("write");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("held", 1)));
        wait_until(|| pool.resting() == pool.threads() - 1);
        assert_eq!(pool.resting(), pool.threads() - 1, "one listener");
        // A batch that is held while input comes on the other tasks.
        sizes.lock().expect("not poisoned").clear();
        held_client.write_all(&[2]).expect("write");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("held", 2)));
        for client in &mut clients {
            client.write_all(&[3]).expect("write");
        }
        release.send(()).expect("release");
        for _ in 0..BATCHED {
            assert_eq!(seen.recv_timeout(WAIT), Ok(("batched", 3)));
        }
        assert_eq!(
            *sizes.lock().expect("not poisoned"),
            vec![1, BATCHED],
            "the held batch, then one for the input that came meanwhile"
        );

        // A worker about to run a statement that may block (one that is
        // not a batch's read) wakes a rester to listen in its place: input
        // on the others is served while it blocks, not found later by the
        // watchdog.
        wait_until(|| pool.resting() == pool.threads() - 1);
        let (mut gated, mut gated_client) = echo("gated", false, &seen_tx);
        let (open, gate) = mpsc::channel();
        gated.gate = Some(gate);
        gated_client.write_all(&[4]).expect("write");
        pool.submit(gated);
        wait_until(|| pool.running() == 1);
        assert_eq!(pool.running(), 1, "the gated statement runs");
        let rescued = pool.rescued();
        clients[0].write_all(&[5]).expect("write");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("batched", 5)));
        assert_eq!(pool.rescued(), rescued, "a listener took the input");
        open.send(()).expect("open");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("gated", 4)));
    }

    /// Many idle tasks on few threads.
    #[test]
    fn a_thousand_idle_tasks_need_no_thread_each() {
        let pool = ThreadPool::start(options(2, 500)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let mut clients = Vec::new();
        for _ in 0..1_000 {
            let (task, mut client) = echo("idle", false, &seen_tx);
            client.write_all(&[0]).expect("write");
            pool.submit(task);
            clients.push(client);
        }
        for _ in 0..1_000 {
            assert!(seen.recv_timeout(WAIT).is_ok());
        }
        for (at, client) in clients.iter_mut().enumerate().step_by(100) {
            client.write_all(&[at as u8]).expect("write");
        }
        for _ in 0..10 {
            assert!(seen.recv_timeout(WAIT).is_ok());
        }
        // Per group: the statements it may run, and one listener.
        let most = 2 * (GROUP_STATEMENTS_MAX + 1);
        assert!(pool.threads() <= most, "{} workers", pool.threads());
    }

    /// With the group's every worker busy, a connection in a transaction
    /// is served before those that queued earlier.
    #[test]
    fn started_transactions_are_served_first() {
        let pool = ThreadPool::start(options(1, 60_000)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (gates, mut clients) = fill_group(&pool, "busy", &seen_tx);
        let deadline = Instant::now() + WAIT;
        while pool.running() < 1 + THREAD_POOL_OVERSUBSCRIBE && Instant::now() < deadline {
            thread::yield_now();
        }
        for name in ["low-1", "low-2", "low-3"] {
            let (task, mut client) = echo(name, false, &seen_tx);
            client.write_all(&[0]).expect("write");
            pool.submit(task);
            clients.push(client);
        }
        let (task, mut client) = echo("in-transaction", true, &seen_tx);
        client.write_all(&[0]).expect("write");
        pool.submit(task);
        clients.push(client);
        // One worker free: it takes the started transaction first.
        gates[0].send(()).expect("open");
        assert_eq!(seen.recv_timeout(WAIT), Ok(("busy", 0)));
        assert_eq!(seen.recv_timeout(WAIT), Ok(("in-transaction", 0)));
        for gate in &gates[1..] {
            gate.send(()).expect("open");
        }
    }

    /// A client's close that comes with its command's bytes, while no
    /// worker listens, reaches the listener as one event; the task reads
    /// the bytes (a short read: it says it read everything) and would park
    /// with no edge left for the close. The close's flag makes the pool
    /// look at the socket before parking, so the task sees the end and its
    /// session ends (with the old rule it lived until `wait_timeout`).
    #[test]
    fn a_close_that_came_with_the_last_command_ends_the_task() {
        let pool = ThreadPool::start(options(1, 60_000)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (mut task, mut client) = echo("closing", false, &seen_tx);
        task.claims_drained = true;
        client.write_all(&[1]).expect("write");
        pool.submit(task);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("closing", 1)));
        let group = &pool.groups[0];
        wait_until(|| group.parked().tasks.len() == 1);
        assert_eq!(group.parked().tasks.len(), 1, "the task parked");
        // Every worker busy: nobody takes the socket's edge until both the
        // byte and the close are there.
        let (gates, _clients) = fill_group(&pool, "busy", &seen_tx);
        wait_every_worker_runs(group);
        assert_eq!(group.lock().listening, 0, "every worker runs a gated task");
        client.write_all(&[2]).expect("write");
        client
            .shutdown(std::net::Shutdown::Write)
            .expect("shutdown");
        for gate in &gates {
            gate.send(()).expect("open");
        }
        let mut got = Vec::new();
        while got.len() < gates.len() + 1 {
            got.push(seen.recv_timeout(WAIT).expect("served"));
        }
        assert!(got.contains(&("closing", 2)), "{got:?}");
        // The task ended: its socket closed, so the client reads the end.
        client.set_read_timeout(Some(WAIT)).expect("timeout");
        let mut byte = [0u8];
        assert_eq!(
            client.read(&mut byte).map_err(|e| e.kind()),
            Ok(0),
            "the task saw its client's close"
        );
    }

    /// A task that blocks past the stall limit lets the group start
    /// another worker for what waits.
    #[test]
    fn a_stalled_group_starts_another_worker() {
        let pool = ThreadPool::start(options(1, 20)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (gates, clients) = fill_group(&pool, "stuck", &seen_tx);
        let (task, mut client) = echo("short", false, &seen_tx);
        client.write_all(&[7]).expect("write");
        pool.submit(task);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("short", 7)));
        assert!(pool.threads() > 1 + THREAD_POOL_OVERSUBSCRIBE);
        for gate in &gates {
            gate.send(()).expect("open");
        }
        drop(clients);
    }

    /// A kick meant for a worker that was leaving `epoll_wait` (and then
    /// ran a long statement) is taken by nobody while nobody listens: the
    /// watchdog must not count its permit as a worker on its way.
    #[test]
    fn a_kick_nobody_takes_does_not_hold_back_the_stalled_group() {
        let pool = ThreadPool::start(options(1, 20)).expect("pool");
        let (seen_tx, seen) = mpsc::channel();
        let (gates, clients) = fill_group(&pool, "stuck", &seen_tx);
        let group = &pool.groups[0];
        wait_every_worker_runs(group);
        {
            // The stray kick, as `wake_one` leaves it.
            let mut state = group.lock();
            assert_eq!(state.listening, 0, "every worker runs a gated task");
            state.permits += 1;
            group.kick();
        }
        let (task, mut client) = echo("short", false, &seen_tx);
        client.write_all(&[7]).expect("write");
        pool.submit(task);
        assert_eq!(seen.recv_timeout(WAIT), Ok(("short", 7)));
        for gate in &gates {
            gate.send(()).expect("open");
        }
        drop(clients);
    }
}
