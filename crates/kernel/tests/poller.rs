//! An execution thread that runs a `Poller` (the receive loop, when the
//! layout has no recv thread): it turns the poller every round, sleeps in
//! the poller's wait, is woken from other threads through the poller's
//! waker without losing a wake-up, and still fires its timers on time.
//! Every wait is bounded.

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use kernel::runtime::{
    BlockPlacement, Injector, NodeControl, PollWaker, Poller, RemoteSender, RunningRuntime,
    Runtime, RuntimeError, RuntimeLimits,
};
use kernel::thread_config::{ThreadConfig, ThreadLayout, ThreadRole};

use common::place;
use signal::{BlockNumber, BlockRef, NodeId, Signal, SignalBody};

const WAIT_MAX: Duration = Duration::from_secs(20);

fn node(id: u8) -> NodeId {
    NodeId::new(id).expect("test node ids are not zero")
}

fn addr(block: BlockNumber, instance: u16) -> BlockRef {
    BlockRef::new(node(1), block, instance)
}

/// A peer's address: what the fake network says its signals come from.
fn peer() -> BlockRef {
    BlockRef::new(node(2), BlockNumber::MEMBERSHIP, 0)
}

fn layout(text: &str) -> ThreadLayout {
    ThreadLayout::from_thread_config(&ThreadConfig::parse(text).expect("valid ThreadConfig"))
}

/// What the fake network and its waker share with the test.
#[derive(Default)]
struct Net {
    state: Mutex<NetState>,
    changed: Condvar,
    waits: AtomicU64,
    /// The longest timeout a wait was given, in microseconds.
    longest_wait_us: AtomicU64,
}

#[derive(Default)]
struct NetState {
    /// Arrived and not yet taken by a turn.
    arrived: VecDeque<Signal>,
    /// A wake that no wait has consumed yet (like an eventfd left readable).
    woken: bool,
}

impl Net {
    /// Input arrives from the network: the wait ends, the next turn takes it.
    fn arrive(&self, signals: impl IntoIterator<Item = Signal>) {
        let mut state = self.state.lock().expect("not poisoned");
        state.arrived.extend(signals);
        self.changed.notify_all();
    }
}

/// A poller over `Net` that hands what arrived to an injector, keeping what
/// does not fit for a later turn, as the transport's receive loop does.
struct FakePoller {
    net: Arc<Net>,
    injector: Injector,
}

impl Poller for FakePoller {
    fn turn(&mut self) {
        let mut state = self.net.state.lock().expect("not poisoned");
        while let Some(signal) = state.arrived.pop_front() {
            if let Err(refused) = self.injector.push(signal) {
                state.arrived.push_front(refused);
                break;
            }
        }
        drop(state);
        self.injector.flush();
    }

    fn wait(&mut self, timeout: Duration) {
        self.net.waits.fetch_add(1, Ordering::SeqCst);
        self.net
            .longest_wait_us
            .fetch_max(timeout.as_micros() as u64, Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        let mut state = self.net.state.lock().expect("not poisoned");
        while !state.woken && state.arrived.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            state = self
                .net
                .changed
                .wait_timeout(state, deadline - now)
                .expect("not poisoned")
                .0;
        }
        state.woken = false;
    }

    fn waker(&self) -> Arc<dyn PollWaker> {
        Arc::new(NetWaker(Arc::clone(&self.net)))
    }
}

struct NetWaker(Arc<Net>);

impl PollWaker for NetWaker {
    fn wake(&self) {
        let mut state = self.0.state.lock().expect("not poisoned");
        state.woken = true;
        self.0.changed.notify_all();
    }
}

/// Counts heartbeats and records any that come out of order.
fn counter(
    address: BlockRef,
    role: ThreadRole,
    seen: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
) -> BlockPlacement {
    place(
        address,
        role,
        |_| {},
        move |signal, _| {
            let SignalBody::Heartbeat { view_id } = signal.body else {
                return;
            };
            let expected = seen.load(Ordering::SeqCst);
            if u64::from(view_id) != expected {
                let error = format!("got {view_id}, expected {expected}");
                errors.lock().expect("not poisoned").push(error);
            }
            seen.store(u64::from(view_id) + 1, Ordering::SeqCst);
        },
    )
}

fn heartbeat(to: BlockRef, n: u32) -> Signal {
    Signal {
        receiver: to,
        sender: peer(),
        body: SignalBody::Heartbeat { view_id: n },
    }
}

struct NoRemote;

impl RemoteSender for NoRemote {
    fn send(&mut self, signal: &Signal) {
        panic!("no signal leaves this node in these tests: {signal:?}");
    }
    fn flush(&mut self) {}
}

struct NoControl;

impl NodeControl for NoControl {
    fn disconnect(&self, _: NodeId) {}
    fn shutdown(&self, _: bool, _: &str) {}
    fn thread_failed(&self, thread: &str, _: ThreadRole, reason: &str) {
        panic!("thread {thread} failed: {reason}");
    }
    fn watchdog_report(&self, _: &str, _: ThreadRole, _: Duration) {}
}

fn limits(queue_capacity_signals: usize) -> RuntimeLimits {
    RuntimeLimits {
        queue_capacity_signals,
        watchdog_stuck_ms: 60_000,
        ..RuntimeLimits::default()
    }
}

/// Builds and starts `blocks` on `layout` with a `FakePoller` attached;
/// returns the runtime, the network and an injector for a feeder thread.
fn start_polled(
    layout: &ThreadLayout,
    blocks: Vec<BlockPlacement>,
    queue_capacity_signals: usize,
) -> (RunningRuntime, Arc<Net>, Injector) {
    let mut runtime =
        Runtime::new(node(1), layout, blocks, limits(queue_capacity_signals)).expect("valid");
    let net = Arc::new(Net::default());
    let poller = FakePoller {
        net: Arc::clone(&net),
        injector: runtime.injector(),
    };
    let feeder = runtime.injector();
    assert_eq!(
        runtime.attach_poller(Box::new(poller)).expect("attaches"),
        "main"
    );
    let running = runtime
        .start(&mut |_| Box::new(NoRemote), Arc::new(NoControl))
        .expect("starts");
    (running, net, feeder)
}

/// Waits for `condition` for at most `limit`; returns how long it took.
fn within(limit: Duration, mut condition: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while !condition() {
        if start.elapsed() > limit {
            return None;
        }
        std::thread::yield_now();
    }
    Some(start.elapsed())
}

#[test]
fn a_sleeping_polling_thread_is_woken_by_other_threads_and_the_network_every_time() {
    const ROUNDS: u32 = 2_000;
    // Well below the runtime's 1 s sleep bound: a lost wake-up shows as a
    // round that waits out that bound.
    const PROMPT: Duration = Duration::from_millis(900);
    let seen = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let target = addr(BlockNumber::MEMBERSHIP, 0);
    let blocks = vec![counter(
        target,
        ThreadRole::Main,
        Arc::clone(&seen),
        Arc::clone(&errors),
    )];
    let (running, net, mut feeder) =
        start_polled(&layout("ldm={count=0},recv={count=0}"), blocks, 64);
    let waits_before = net.waits.load(Ordering::SeqCst);
    let mut slowest = Duration::ZERO;
    for n in 0..ROUNDS {
        // Half the time give the thread a moment to fall asleep first; the
        // other half push while it is on its way there.
        if n % 2 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        if n % 4 < 2 {
            // From another thread, through an injector (as the mgm session).
            assert!(feeder.push(heartbeat(target, n)).is_ok());
            feeder.flush();
        } else {
            // From the network: the poller's own input.
            net.arrive([heartbeat(target, n)]);
        }
        let took = within(PROMPT, || seen.load(Ordering::SeqCst) > u64::from(n))
            .unwrap_or_else(|| panic!("signal {n} not executed within {PROMPT:?}"));
        slowest = slowest.max(took);
    }
    let waits = net.waits.load(Ordering::SeqCst) - waits_before;
    running.stop();
    assert!(
        errors.lock().expect("not poisoned").is_empty(),
        "{errors:?}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), u64::from(ROUNDS));
    // The thread did sleep in the poller between signals, not only spin.
    assert!(
        waits >= u64::from(ROUNDS) / 4,
        "{waits} waits in {ROUNDS} rounds"
    );
    eprintln!("slowest wake-up: {slowest:?}");
}

#[test]
fn timers_fire_on_time_while_the_thread_waits_in_the_poller() {
    const DELAY: Duration = Duration::from_millis(60);
    // Times as the runtime sees them (`Context::now`, the round's clock): a
    // timer is due `DELAY` after the `now` it was set at, which may be a
    // little before the wall clock read in the same execution.
    let fired = Arc::new(Mutex::new(Vec::<kernel::time::Instant>::new()));
    let fired_in_block = Arc::clone(&fired);
    let started = Arc::new(Mutex::new(None::<kernel::time::Instant>));
    let started_in_block = Arc::clone(&started);
    let me = addr(BlockNumber::MEMBERSHIP, 0);
    let blocks = vec![place(
        me,
        ThreadRole::Main,
        move |ctx| {
            *started_in_block.lock().expect("not poisoned") = Some(ctx.now());
            ctx.set_timer(DELAY, 1);
        },
        move |signal, ctx| {
            if let SignalBody::Timeout { timer_id } = signal.body {
                fired_in_block.lock().expect("not poisoned").push(ctx.now());
                // Always one timer pending: every wait must end by it.
                ctx.set_timer(DELAY, timer_id + 1);
            }
        },
    )];
    let (running, net, _feeder) = start_polled(&layout("ldm={count=0},recv={count=0}"), blocks, 64);
    let done = within(WAIT_MAX, || fired.lock().expect("not poisoned").len() >= 3);
    running.stop();
    assert!(done.is_some(), "three timers did not fire");
    let start = started
        .lock()
        .expect("not poisoned")
        .expect("block started");
    let fired = fired.lock().expect("not poisoned").clone();
    let mut previous = start;
    for &at in &fired[..3] {
        let gap = at.saturating_since(previous);
        assert!(gap >= DELAY, "a timer fired early: {gap:?}");
        // Late by the sleep bound (1 s) would mean the wait ignored the timer.
        assert!(
            gap < DELAY + Duration::from_millis(500),
            "a timer fired late: {gap:?}"
        );
        previous = at;
    }
    assert!(
        net.waits.load(Ordering::SeqCst) >= 3,
        "the thread never waited in the poller"
    );
    assert!(
        net.longest_wait_us.load(Ordering::SeqCst) <= DELAY.as_micros() as u64,
        "a wait outlasted the next timer"
    );
}

#[test]
fn a_burst_larger_than_the_own_queue_arrives_whole_and_in_order() {
    // The polling thread is the consumer of the queue it feeds: it must not
    // wait for room there, and nothing may be dropped or reordered.
    const SIGNALS: u32 = 20_000;
    let on_main = Arc::new(AtomicU64::new(0));
    let on_ldm = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let main_block = addr(BlockNumber::MEMBERSHIP, 0);
    let ldm_block = addr(BlockNumber::LOCAL_DATA_MANAGER, 0);
    let blocks = vec![
        counter(
            main_block,
            ThreadRole::Main,
            Arc::clone(&on_main),
            Arc::clone(&errors),
        ),
        counter(
            ldm_block,
            ThreadRole::Ldm,
            Arc::clone(&on_ldm),
            Arc::clone(&errors),
        ),
    ];
    // An ldm thread besides main: deliveries go to another thread's queue too.
    let (running, net, _feeder) = start_polled(&layout("ldm={count=1},recv={count=0}"), blocks, 16);
    net.arrive((0..SIGNALS).flat_map(|n| [heartbeat(main_block, n), heartbeat(ldm_block, n)]));
    let total = u64::from(SIGNALS);
    let done = within(WAIT_MAX, || {
        on_main.load(Ordering::SeqCst) == total && on_ldm.load(Ordering::SeqCst) == total
    });
    let dropped = running.dropped_signals();
    running.stop();
    assert!(
        done.is_some(),
        "main {on_main:?}, ldm {on_ldm:?} of {total}"
    );
    assert!(
        errors.lock().expect("not poisoned").is_empty(),
        "{errors:?}"
    );
    assert_eq!(dropped, 0);
}

#[test]
fn a_poller_needs_a_thread_that_hosts_the_recv_role() {
    let blocks = || {
        vec![place(
            addr(BlockNumber::MEMBERSHIP, 0),
            ThreadRole::Main,
            |_| {},
            |_, _| {},
        )]
    };
    let poller = |runtime: &mut Runtime| FakePoller {
        net: Arc::new(Net::default()),
        injector: runtime.injector(),
    };
    // A recv thread of its own: no execution thread may poll.
    let mut runtime =
        Runtime::new(node(1), &layout("ldm={count=0}"), blocks(), limits(64)).expect("valid");
    let fake = poller(&mut runtime);
    let error = runtime.attach_poller(Box::new(fake)).unwrap_err();
    assert!(matches!(error, RuntimeError::NoPollingThread), "{error}");
    assert!(error.to_string().contains("recv={count=0}"), "{error}");
    let mut runtime = Runtime::new(
        node(1),
        &layout("ldm={count=0},recv={count=0}"),
        blocks(),
        limits(64),
    )
    .expect("valid");
    let first = poller(&mut runtime);
    let second = poller(&mut runtime);
    runtime
        .attach_poller(Box::new(first))
        .expect("the first attaches");
    let error = runtime.attach_poller(Box::new(second)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "a poller is already attached to execution thread main"
    );
}
