//! The real runtime with real threads: delivery within and between threads,
//! back-pressure, timers, remote signals, node control, the watchdog,
//! injectors and stopping. Every wait is bounded.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::place;
use kernel::runtime::{
    BlockPlacement, Injector, NodeControl, RemoteSender, RunningRuntime, Runtime, RuntimeError,
    RuntimeLimits,
};
use kernel::thread_config::{SpinMethod, ThreadLayout, ThreadRole, ThreadSpec};
use kernel::{Context, MonotonicClock};
use signal::{BlockNumber, BlockRef, NodeId, Signal, SignalBody};

const WAIT_MAX: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(5);

fn node(id: u8) -> NodeId {
    NodeId::new(id).expect("test node ids are not zero")
}

const ME: u8 = 1;

fn addr(block: BlockNumber, instance: u16) -> BlockRef {
    BlockRef::new(node(ME), block, instance)
}

const MEMBERSHIP: BlockNumber = BlockNumber::MEMBERSHIP;
const TC: BlockNumber = BlockNumber::TRANSACTION_COORDINATOR;
const LDM: BlockNumber = BlockNumber::LOCAL_DATA_MANAGER;
const REP: BlockNumber = BlockNumber(7);

/// Polls `condition` until it holds or `WAIT_MAX` passes.
fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + WAIT_MAX;
    loop {
        if condition() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

fn spec(name: &str, role: ThreadRole, index: u32, hosts: &[ThreadRole]) -> ThreadSpec {
    ThreadSpec {
        name: name.to_string(),
        role,
        index,
        hosts: hosts.to_vec(),
        cpubind: None,
        cpuset: None,
        realtime: false,
        batch: false,
        spintime_us: 0,
        spintime_given: false,
        spin_method: SpinMethod::Static,
    }
}

/// ldm0, ldm1, tc0, main (hosting rep too), wd.
fn layout() -> ThreadLayout {
    ThreadLayout {
        threads: vec![
            spec("ldm0", ThreadRole::Ldm, 0, &[ThreadRole::Ldm]),
            spec("ldm1", ThreadRole::Ldm, 1, &[ThreadRole::Ldm]),
            spec("tc0", ThreadRole::Tc, 0, &[ThreadRole::Tc]),
            spec(
                "main",
                ThreadRole::Main,
                0,
                &[ThreadRole::Main, ThreadRole::Rep],
            ),
            spec("recv0", ThreadRole::Recv, 0, &[ThreadRole::Recv]),
            spec("wd", ThreadRole::Watchdog, 0, &[ThreadRole::Watchdog]),
        ],
    }
}

fn heartbeat(n: u32) -> SignalBody {
    SignalBody::Heartbeat { view_id: n }
}

fn heartbeat_value(signal: &Signal) -> Option<u32> {
    match signal.body {
        SignalBody::Heartbeat { view_id } => Some(view_id),
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq)]
enum RemoteEvent {
    Send { thread: usize, signal: Signal },
    Flush { thread: usize },
}

/// Records what execution threads hand to the network.
#[derive(Clone, Default)]
struct RecordingRemote {
    events: Arc<Mutex<Vec<RemoteEvent>>>,
    senders_made: Arc<Mutex<Vec<usize>>>,
}

struct ThreadRemote {
    thread: usize,
    events: Arc<Mutex<Vec<RemoteEvent>>>,
}

impl RemoteSender for ThreadRemote {
    fn send(&mut self, signal: &Signal) {
        let event = RemoteEvent::Send {
            thread: self.thread,
            signal: signal.clone(),
        };
        self.events.lock().expect("not poisoned").push(event);
    }
    fn flush(&mut self) {
        let event = RemoteEvent::Flush {
            thread: self.thread,
        };
        self.events.lock().expect("not poisoned").push(event);
    }
}

impl RecordingRemote {
    fn factory(&self) -> impl FnMut(usize) -> Box<dyn RemoteSender> {
        let remote = self.clone();
        move |thread| {
            remote
                .senders_made
                .lock()
                .expect("not poisoned")
                .push(thread);
            Box::new(ThreadRemote {
                thread,
                events: Arc::clone(&remote.events),
            })
        }
    }

    fn events(&self) -> Vec<RemoteEvent> {
        self.events.lock().expect("not poisoned").clone()
    }
}

#[derive(Clone, Debug, PartialEq)]
enum ControlEvent {
    Disconnect(NodeId),
    Shutdown {
        restart: bool,
        reason: String,
    },
    Watchdog {
        thread: String,
        role: ThreadRole,
        stuck_for: Duration,
    },
    ThreadFailed {
        thread: String,
        role: ThreadRole,
    },
}

#[derive(Default)]
struct RecordingControl {
    events: Mutex<Vec<ControlEvent>>,
}

impl RecordingControl {
    fn events(&self) -> Vec<ControlEvent> {
        self.events.lock().expect("not poisoned").clone()
    }
    fn push(&self, event: ControlEvent) {
        self.events.lock().expect("not poisoned").push(event);
    }
}

impl NodeControl for RecordingControl {
    fn disconnect(&self, node: NodeId) {
        self.push(ControlEvent::Disconnect(node));
    }
    fn shutdown(&self, restart: bool, reason: &str) {
        self.push(ControlEvent::Shutdown {
            restart,
            reason: reason.to_string(),
        });
    }
    fn thread_failed(&self, thread: &str, role: ThreadRole, _reason: &str) {
        self.push(ControlEvent::ThreadFailed {
            thread: thread.to_string(),
            role,
        });
    }
    fn watchdog_report(&self, thread: &str, role: ThreadRole, stuck_for: Duration) {
        self.push(ControlEvent::Watchdog {
            thread: thread.to_string(),
            role,
            stuck_for,
        });
    }
}

fn start(runtime: Runtime) -> (RunningRuntime, RecordingRemote, Arc<RecordingControl>) {
    let remote = RecordingRemote::default();
    let control = Arc::new(RecordingControl::default());
    let control_dyn: Arc<dyn NodeControl> = Arc::clone(&control) as Arc<dyn NodeControl>;
    let running = runtime
        .start(&mut remote.factory(), control_dyn)
        .expect("runtime starts");
    (running, remote, control)
}

fn quiet_limits() -> RuntimeLimits {
    RuntimeLimits {
        watchdog_stuck_ms: 60_000,
        ..RuntimeLimits::default()
    }
}

#[test]
fn ping_pong_between_two_threads_counts_every_exchange() {
    const EXCHANGES: u32 = 100_000;
    let pings = Arc::new(AtomicU64::new(0));
    let pongs = Arc::new(AtomicU64::new(0));
    let pinger = addr(TC, 0);
    let ponger = addr(LDM, 0);
    let pongs_seen = Arc::clone(&pongs);
    let pings_seen = Arc::clone(&pings);
    let blocks = vec![
        place(
            pinger,
            ThreadRole::Tc,
            move |ctx| ctx.send(ponger, heartbeat(1)),
            move |signal, ctx| {
                let n = heartbeat_value(&signal).expect("only heartbeats");
                pongs_seen.fetch_add(1, Ordering::SeqCst);
                if n < EXCHANGES {
                    ctx.send(ponger, heartbeat(n + 1));
                }
            },
        ),
        place(
            ponger,
            ThreadRole::Ldm,
            |_| {},
            move |signal, ctx| {
                let n = heartbeat_value(&signal).expect("only heartbeats");
                pings_seen.fetch_add(1, Ordering::SeqCst);
                ctx.send(signal.sender, heartbeat(n));
            },
        ),
    ];
    // One side spins before sleeping, the other sleeps at once: both idle
    // paths run. (Spinning on both sides makes a busy two-CPU machine slow.)
    let mut layout = layout();
    layout.threads[2].spintime_us = 50;
    let runtime = Runtime::new(node(ME), &layout, blocks, quiet_limits()).expect("valid");
    let figures = runtime.thread_figures();
    let (running, _, control) = start(runtime);
    assert_eq!(running.thread_names(), vec!["ldm0", "tc0", "wd"]);
    assert!(wait_until(
        || pongs.load(Ordering::SeqCst) == u64::from(EXCHANGES)
    ));
    // Static spinning: each thread shows its spintime as the spin in force.
    let limits: Vec<(String, u64)> = figures
        .snapshot()
        .into_iter()
        .map(|t| (t.name, t.spin_limit_us))
        .collect();
    assert_eq!(limits, [("ldm0".to_string(), 0), ("tc0".to_string(), 50)]);
    running.stop();
    assert_eq!(pings.load(Ordering::SeqCst), u64::from(EXCHANGES));
    assert_eq!(pongs.load(Ordering::SeqCst), u64::from(EXCHANGES));
    assert!(control.events().is_empty(), "{:?}", control.events());
}

/// Receives heartbeats numbered from 0 from several senders; records each
/// sender's count and any gap or reordering.
fn ordered_receiver(
    address: BlockRef,
    role: ThreadRole,
    received: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
) -> BlockPlacement {
    let mut next: std::collections::HashMap<BlockRef, u32> = Default::default();
    place(
        address,
        role,
        |_| {},
        move |signal, _| {
            let n = heartbeat_value(&signal).expect("only heartbeats");
            let expected = next.entry(signal.sender).or_insert(0);
            if n != *expected {
                let error = format!("from {}: got {n}, expected {}", signal.sender, *expected);
                errors.lock().expect("not poisoned").push(error);
            }
            *expected = n + 1;
            received.fetch_add(1, Ordering::SeqCst);
        },
    )
}

#[test]
fn burst_far_beyond_queue_capacity_arrives_complete_and_in_order() {
    const CHUNKED: u32 = 20_000;
    const CHUNK: u32 = 100;
    const AT_ONCE: u32 = 5_000;
    let receiver = addr(TC, 0);
    let received = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let go = SignalBody::ApiRegReq { version: 0 };
    let mut sent = 0u32;
    let blocks = vec![
        ordered_receiver(
            receiver,
            ThreadRole::Tc,
            Arc::clone(&received),
            Arc::clone(&errors),
        ),
        // Sends in chunks, one chunk per execution, driven by signals to itself.
        place(
            addr(LDM, 0),
            ThreadRole::Ldm,
            {
                let go = go.clone();
                move |ctx| ctx.send(ctx.me(), go.clone())
            },
            move |_, ctx| {
                for _ in 0..CHUNK {
                    ctx.send(receiver, heartbeat(sent));
                    sent += 1;
                }
                if sent < CHUNKED {
                    ctx.send(ctx.me(), go.clone());
                }
            },
        ),
        // Sends everything from one execution: the pending list takes it.
        place(
            addr(LDM, 1),
            ThreadRole::Ldm,
            move |ctx| {
                for n in 0..AT_ONCE {
                    ctx.send(receiver, heartbeat(n));
                }
            },
            |_, _| {},
        ),
    ];
    let limits = RuntimeLimits {
        queue_capacity_signals: 8,
        batch_signals_max: 4,
        ..quiet_limits()
    };
    let runtime = Runtime::new(node(ME), &layout(), blocks, limits).expect("valid");
    let (running, _, _) = start(runtime);
    let total = u64::from(CHUNKED + AT_ONCE);
    assert!(wait_until(|| received.load(Ordering::SeqCst) == total));
    running.stop();
    assert_eq!(received.load(Ordering::SeqCst), total);
    assert!(
        errors.lock().expect("not poisoned").is_empty(),
        "{:?}",
        errors
    );
}

#[test]
fn timers_fire_in_deadline_then_set_order_and_never_early() {
    // (delay ms, timer id), in the order set.
    const TIMERS: [(u64, u32); 5] = [(50, 1), (10, 2), (30, 3), (30, 4), (0, 5)];
    let fired: Arc<Mutex<Vec<(u32, Duration)>>> = Arc::default();
    let record = Arc::clone(&fired);
    // The runtime's clock, known only once it is built, before it starts.
    let clock: Arc<Mutex<Option<MonotonicClock>>> = Arc::default();
    let clock_read = Arc::clone(&clock);
    let set_at: Arc<Mutex<Option<kernel::Instant>>> = Arc::default();
    let set_at_write = Arc::clone(&set_at);
    let timers = place(
        addr(MEMBERSHIP, 0),
        ThreadRole::Main,
        move |ctx| {
            *set_at_write.lock().expect("not poisoned") = Some(ctx.now());
            for (delay_ms, id) in TIMERS {
                ctx.set_timer(Duration::from_millis(delay_ms), id);
            }
        },
        move |signal, ctx| {
            let SignalBody::Timeout { timer_id } = signal.body else {
                return;
            };
            assert_eq!(signal.sender, ctx.me());
            assert_eq!(signal.receiver, ctx.me());
            let clock = clock_read
                .lock()
                .expect("not poisoned")
                .expect("set before start");
            // Measured on the OS clock, from the `now` the timers were set at.
            let base = set_at.lock().expect("not poisoned").expect("set in start");
            record
                .lock()
                .expect("not poisoned")
                .push((timer_id, clock.to_std(base).elapsed()));
        },
    );
    let mut layout = layout();
    layout.threads[3].spintime_us = 50;
    let runtime = Runtime::new(node(ME), &layout, vec![timers], quiet_limits()).expect("valid");
    *clock.lock().expect("not poisoned") = Some(runtime.clock());
    let (running, _, _) = start(runtime);
    assert!(wait_until(
        || fired.lock().expect("not poisoned").len() == TIMERS.len()
    ));
    running.stop();
    let fired = fired.lock().expect("not poisoned").clone();
    let order: Vec<u32> = fired.iter().map(|(id, _)| *id).collect();
    assert_eq!(order, vec![5, 2, 3, 4, 1]);
    for (id, waited) in fired {
        let (delay_ms, _) = TIMERS
            .iter()
            .find(|(_, t)| *t == id)
            .copied()
            .expect("known id");
        assert!(
            waited >= Duration::from_millis(delay_ms),
            "timer {id} of {delay_ms} ms fired after {waited:?}"
        );
    }
}

#[test]
fn one_thread_hosting_every_role_runs_all_blocks() {
    const LAPS: u32 = 1_000;
    let everything = [
        ThreadRole::Main,
        ThreadRole::Ldm,
        ThreadRole::Tc,
        ThreadRole::Rep,
    ];
    let layout = ThreadLayout {
        threads: vec![spec("main", ThreadRole::Main, 0, &everything)],
    };
    // A ring main → tc → ldm0 → ldm1 → rep → main, LAPS times round.
    let ring = [
        addr(MEMBERSHIP, 0),
        addr(TC, 0),
        addr(LDM, 0),
        addr(LDM, 1),
        addr(REP, 0),
    ];
    let roles = [
        ThreadRole::Main,
        ThreadRole::Tc,
        ThreadRole::Ldm,
        ThreadRole::Ldm,
        ThreadRole::Rep,
    ];
    let laps = Arc::new(AtomicU64::new(0));
    let threads_seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut blocks = Vec::new();
    for (i, (address, role)) in ring.iter().zip(roles).enumerate() {
        let next = ring[(i + 1) % ring.len()];
        let laps = Arc::clone(&laps);
        let seen = Arc::clone(&threads_seen);
        blocks.push(place(
            *address,
            role,
            move |ctx| {
                let name = std::thread::current().name().unwrap_or("").to_string();
                seen.lock().expect("not poisoned").push(name);
                if i == 0 {
                    ctx.send(next, heartbeat(0));
                }
            },
            move |signal, ctx| {
                let lap = heartbeat_value(&signal).expect("only heartbeats");
                if i == 0 {
                    laps.store(u64::from(lap) + 1, Ordering::SeqCst);
                    if lap + 1 < LAPS {
                        ctx.send(next, heartbeat(lap + 1));
                    }
                } else {
                    ctx.send(next, heartbeat(lap));
                }
            },
        ));
    }
    let runtime = Runtime::new(node(ME), &layout, blocks, quiet_limits()).expect("valid");
    let (running, _, _) = start(runtime);
    assert_eq!(running.thread_names(), vec!["main", "wd"]);
    assert!(wait_until(|| laps.load(Ordering::SeqCst) == u64::from(LAPS)));
    running.stop();
    let seen = threads_seen.lock().expect("not poisoned").clone();
    assert_eq!(seen, vec!["main"; ring.len()]);
}

#[test]
fn block_start_runs_on_its_own_thread_before_its_first_signal() {
    let started = Arc::new(AtomicBool::new(false));
    let report: Arc<Mutex<Vec<String>>> = Arc::default();
    let receiver = addr(TC, 0);
    let started_write = Arc::clone(&started);
    let started_read = Arc::clone(&started);
    let report_start = Arc::clone(&report);
    let report_execute = Arc::clone(&report);
    let blocks = vec![
        // Sends from its own start, possibly before the receiver's thread started.
        place(
            addr(LDM, 0),
            ThreadRole::Ldm,
            move |ctx| ctx.send(receiver, heartbeat(7)),
            |_, _| {},
        ),
        place(
            receiver,
            ThreadRole::Tc,
            move |_| {
                let name = std::thread::current().name().unwrap_or("").to_string();
                report_start
                    .lock()
                    .expect("not poisoned")
                    .push(format!("start on {name}"));
                started_write.store(true, Ordering::SeqCst);
            },
            move |signal, _| {
                let name = std::thread::current().name().unwrap_or("").to_string();
                let started = started_read.load(Ordering::SeqCst);
                let n = heartbeat_value(&signal).unwrap_or(0);
                let line = format!("signal {n} on {name}, started {started}");
                report_execute.lock().expect("not poisoned").push(line);
            },
        ),
    ];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("valid");
    let (running, _, _) = start(runtime);
    assert!(wait_until(
        || report.lock().expect("not poisoned").len() == 2
    ));
    running.stop();
    assert_eq!(
        *report.lock().expect("not poisoned"),
        vec!["start on tc0", "signal 7 on tc0, started true"]
    );
    assert!(started.load(Ordering::SeqCst));
}

#[test]
fn signals_to_other_nodes_go_to_the_remote_sender_and_are_flushed() {
    let far = BlockRef::new(node(2), MEMBERSHIP, 0);
    let local_count = Arc::new(AtomicU64::new(0));
    let local_seen = Arc::clone(&local_count);
    let blocks = vec![
        place(
            addr(TC, 0),
            ThreadRole::Tc,
            move |ctx| {
                for n in 0..3 {
                    ctx.send(far, heartbeat(n));
                }
                ctx.send(addr(LDM, 0), heartbeat(9));
            },
            |_, _| {},
        ),
        place(
            addr(LDM, 0),
            ThreadRole::Ldm,
            |_| {},
            move |_, _| {
                local_seen.fetch_add(1, Ordering::SeqCst);
            },
        ),
    ];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("valid");
    let (running, remote, _) = start(runtime);
    let tc_thread = running
        .thread_names()
        .iter()
        .position(|name| name == "tc0")
        .expect("tc0 runs");
    assert!(wait_until(
        || remote.events().len() >= 4 && local_count.load(Ordering::SeqCst) == 1
    ));
    running.stop();
    let events = remote.events();
    let sent: Vec<RemoteEvent> = (0..3)
        .map(|n| RemoteEvent::Send {
            thread: tc_thread,
            signal: Signal {
                receiver: far,
                sender: addr(TC, 0),
                body: heartbeat(n),
            },
        })
        .collect();
    assert_eq!(events[..3], sent[..], "{events:?}");
    assert_eq!(events[3], RemoteEvent::Flush { thread: tc_thread });
    // Flushes only follow sends: nothing else went remote.
    assert_eq!(events.len(), 4, "{events:?}");
    let mut made = remote.senders_made.lock().expect("not poisoned").clone();
    made.sort_unstable();
    assert_eq!(made, vec![0, 1], "one remote sender per execution thread");
}

#[test]
fn disconnect_and_shutdown_reach_node_control() {
    let blocks = vec![place(
        addr(MEMBERSHIP, 0),
        ThreadRole::Main,
        |ctx| {
            ctx.disconnect(node(3));
            ctx.shutdown(true, "test asked for a restart");
        },
        |_, _| {},
    )];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("valid");
    let (running, _, control) = start(runtime);
    assert!(wait_until(|| control.events().len() == 2));
    running.stop();
    assert_eq!(
        control.events(),
        vec![
            ControlEvent::Disconnect(node(3)),
            ControlEvent::Shutdown {
                restart: true,
                reason: "test asked for a restart".to_string()
            },
        ]
    );
}

#[test]
fn watchdog_reports_a_block_stuck_in_execute_naming_thread_and_role() {
    let done = Arc::new(AtomicBool::new(false));
    let done_write = Arc::clone(&done);
    let blocks = vec![
        place(
            addr(LDM, 0),
            ThreadRole::Ldm,
            |ctx| ctx.send(ctx.me(), heartbeat(0)),
            move |_, _| {
                std::thread::sleep(Duration::from_millis(500));
                done_write.store(true, Ordering::SeqCst);
            },
        ),
        // An idle block on another thread: sleeping, never stuck.
        place(addr(TC, 0), ThreadRole::Tc, |_| {}, |_, _| {}),
    ];
    let limits = RuntimeLimits {
        watchdog_interval_ms: 10,
        watchdog_stuck_ms: 100,
        ..RuntimeLimits::default()
    };
    let runtime = Runtime::new(node(ME), &layout(), blocks, limits).expect("valid");
    let (running, _, control) = start(runtime);
    assert!(wait_until(|| done.load(Ordering::SeqCst)));
    // Past the stuck episode, with a few more checks for a false report.
    std::thread::sleep(Duration::from_millis(100));
    running.stop();
    let events = control.events();
    assert!(!events.is_empty(), "no watchdog report");
    for event in events {
        let ControlEvent::Watchdog {
            thread,
            role,
            stuck_for,
        } = event
        else {
            panic!("unexpected {event:?}");
        };
        assert_eq!(thread, "ldm0");
        assert_eq!(role, ThreadRole::Ldm);
        assert!(stuck_for >= Duration::from_millis(100), "{stuck_for:?}");
        assert!(stuck_for < Duration::from_millis(600), "{stuck_for:?}");
    }
}

/// Pushes `signals` through `injector`, retrying while a queue is full.
fn inject_all(injector: &mut Injector, signals: impl IntoIterator<Item = Signal>) {
    for mut signal in signals {
        let deadline = std::time::Instant::now() + WAIT_MAX;
        loop {
            match injector.push(signal) {
                Ok(()) => break,
                Err(back) => {
                    assert!(std::time::Instant::now() < deadline, "queue never drained");
                    signal = back;
                    injector.flush();
                    std::thread::yield_now();
                }
            }
        }
    }
    injector.flush();
}

#[test]
fn injector_signals_arrive_in_order_and_unroutable_ones_are_counted() {
    const PER_RECEIVER: u32 = 2_000;
    let received = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let receivers = [
        (addr(TC, 0), ThreadRole::Tc),
        (addr(LDM, 1), ThreadRole::Ldm),
    ];
    let blocks = receivers
        .iter()
        .map(|(address, role)| {
            ordered_receiver(*address, *role, Arc::clone(&received), Arc::clone(&errors))
        })
        .collect();
    let limits = RuntimeLimits {
        queue_capacity_signals: 8,
        ..quiet_limits()
    };
    let mut runtime = Runtime::new(node(ME), &layout(), blocks, limits).expect("valid");
    let mut injector = runtime.injector();
    let (running, _, _) = start(runtime);
    let from = BlockRef::new(node(2), MEMBERSHIP, 0);
    let feeder = std::thread::spawn(move || {
        let signals = (0..PER_RECEIVER).flat_map(|n| {
            receivers.map(|(receiver, _)| Signal {
                receiver,
                sender: from,
                body: heartbeat(n),
            })
        });
        inject_all(&mut injector, signals);
        // No block there, and not this node: dropped and counted.
        let nowhere = [addr(LDM, 9), BlockRef::new(node(4), TC, 0)];
        for receiver in nowhere {
            let signal = Signal {
                receiver,
                sender: from,
                body: heartbeat(0),
            };
            assert!(injector.push(signal).is_ok());
        }
        injector.flush();
    });
    feeder.join().expect("feeder ran");
    let total = u64::from(PER_RECEIVER) * 2;
    assert!(wait_until(|| received.load(Ordering::SeqCst) == total));
    assert_eq!(running.dropped_signals(), 2);
    running.stop();
    assert!(
        errors.lock().expect("not poisoned").is_empty(),
        "{:?}",
        errors
    );
}

#[test]
fn signals_to_unknown_local_blocks_are_dropped_and_counted() {
    let got = Arc::new(AtomicU64::new(0));
    let got_write = Arc::clone(&got);
    let blocks = vec![
        place(
            addr(TC, 0),
            ThreadRole::Tc,
            |ctx| {
                ctx.send(addr(LDM, 5), heartbeat(1));
                ctx.send(addr(BlockNumber(99), 0), heartbeat(2));
                ctx.send(addr(LDM, 0), heartbeat(3));
            },
            |_, _| {},
        ),
        place(
            addr(LDM, 0),
            ThreadRole::Ldm,
            |_| {},
            move |_, _| {
                got_write.fetch_add(1, Ordering::SeqCst);
            },
        ),
    ];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("valid");
    let (running, _, _) = start(runtime);
    assert!(wait_until(
        || got.load(Ordering::SeqCst) == 1 && running.dropped_signals() == 2
    ));
    running.stop();
}

#[test]
fn a_block_sending_to_itself_forever_does_not_starve_other_queues() {
    let arrived = Arc::new(AtomicBool::new(false));
    let arrived_write = Arc::clone(&arrived);
    let spinner = addr(TC, 0);
    let blocks = vec![
        place(
            spinner,
            ThreadRole::Tc,
            |ctx| ctx.send(ctx.me(), heartbeat(0)),
            move |signal, ctx| {
                if signal.sender == ctx.me() {
                    ctx.send(ctx.me(), heartbeat(0));
                } else {
                    arrived_write.store(true, Ordering::SeqCst);
                }
            },
        ),
        place(
            addr(LDM, 0),
            ThreadRole::Ldm,
            move |ctx| ctx.send(spinner, heartbeat(1)),
            |_, _| {},
        ),
    ];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("valid");
    let (running, _, _) = start(runtime);
    assert!(wait_until(|| arrived.load(Ordering::SeqCst)));
    running.stop();
}

#[test]
fn stop_joins_every_thread_and_nothing_runs_after() {
    let ticks = Arc::new(AtomicU64::new(0));
    let ticks_write = Arc::clone(&ticks);
    let blocks = vec![
        // Busy: a timer every millisecond.
        place(
            addr(TC, 0),
            ThreadRole::Tc,
            |ctx| ctx.set_timer(Duration::from_millis(1), 0),
            move |_, ctx| {
                ticks_write.fetch_add(1, Ordering::SeqCst);
                ctx.set_timer(Duration::from_millis(1), 0);
            },
        ),
        // Asleep with nothing to do.
        place(addr(LDM, 0), ThreadRole::Ldm, |_| {}, |_, _| {}),
    ];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("valid");
    let (running, _, _) = start(runtime);
    assert!(wait_until(|| ticks.load(Ordering::SeqCst) >= 10));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        running.stop();
        let _ = done_tx.send(());
    });
    // Generous: a sleeping thread parks for at most a second anyway.
    assert!(
        done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "stop did not return"
    );
    let after_stop = ticks.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(ticks.load(Ordering::SeqCst), after_stop);
}

#[test]
fn threads_bound_to_cpus_the_os_refuses_still_run() {
    let mut layout = layout();
    layout.threads[0].cpubind = Some(100_000);
    layout.threads[2].cpuset = Some(vec![0]);
    let ran = Arc::new(AtomicU64::new(0));
    let blocks = [
        (addr(LDM, 0), ThreadRole::Ldm),
        (addr(TC, 0), ThreadRole::Tc),
    ]
    .into_iter()
    .map(|(address, role)| {
        let ran = Arc::clone(&ran);
        place(
            address,
            role,
            |ctx| ctx.send(ctx.me(), heartbeat(0)),
            move |_, _| {
                ran.fetch_add(1, Ordering::SeqCst);
            },
        )
    })
    .collect();
    let runtime = Runtime::new(node(ME), &layout, blocks, quiet_limits()).expect("valid");
    let (running, _, _) = start(runtime);
    assert!(wait_until(|| ran.load(Ordering::SeqCst) == 2));
    running.stop();
}

#[test]
fn a_panicking_block_ends_the_node_as_a_crash() {
    let blocks = vec![place(
        addr(LDM, 0),
        ThreadRole::Ldm,
        |ctx| ctx.send(ctx.me(), heartbeat(0)),
        |_, _| panic!("test block fails on purpose"),
    )];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("valid");
    let (running, _, control) = start(runtime);
    assert!(wait_until(|| !control.events().is_empty()));
    running.stop();
    let events = control.events();
    let [ControlEvent::ThreadFailed { thread, role }] = &events[..] else {
        panic!("unexpected {events:?}");
    };
    assert_eq!(thread, "ldm0");
    assert_eq!(*role, ThreadRole::Ldm);
}

#[test]
fn invalid_placements_and_limits_are_refused_with_context() {
    let build = |blocks: Vec<BlockPlacement>, limits: RuntimeLimits| {
        Runtime::new(node(ME), &layout(), blocks, limits).err()
    };
    let idle = |address, role| place(address, role, |_| {}, |_, _| {});

    let foreign = BlockRef::new(node(2), TC, 0);
    let error = build(vec![idle(foreign, ThreadRole::Tc)], quiet_limits());
    assert!(
        matches!(error, Some(RuntimeError::ForeignBlock { .. })),
        "{error:?}"
    );

    let twice = vec![
        idle(addr(TC, 0), ThreadRole::Tc),
        idle(addr(TC, 0), ThreadRole::Tc),
    ];
    let error = build(twice, quiet_limits());
    assert!(
        matches!(error, Some(RuntimeError::DuplicateBlock { .. })),
        "{error:?}"
    );

    let error = build(vec![idle(addr(TC, 0), ThreadRole::Recv)], quiet_limits());
    assert!(
        matches!(error, Some(RuntimeError::NotAnExecutionRole { .. })),
        "{error:?}"
    );

    let no_rep = ThreadLayout {
        threads: vec![spec("ldm0", ThreadRole::Ldm, 0, &[ThreadRole::Ldm])],
    };
    let error = Runtime::new(
        node(ME),
        &no_rep,
        vec![idle(addr(REP, 0), ThreadRole::Rep)],
        quiet_limits(),
    )
    .err();
    let Some(RuntimeError::NoThreadForRole { address, role }) = error else {
        panic!("unexpected {error:?}");
    };
    assert_eq!((address, role), (addr(REP, 0), ThreadRole::Rep));

    let limits = RuntimeLimits {
        batch_signals_max: 0,
        ..RuntimeLimits::default()
    };
    let error = build(Vec::new(), limits).expect("refused");
    assert!(error.to_string().contains("batch_signals_max"), "{error}");
}

#[test]
fn threads_waiting_on_each_others_full_queues_are_reported_and_still_stop() {
    // The documented caveat of back-pressure: a cycle of full queues waits
    // forever. The watchdog must see it, and stop must still work.
    let flood = |to: BlockRef| {
        move |ctx: &mut Context<'_>| {
            for n in 0..100 {
                ctx.send(to, heartbeat(n));
            }
        }
    };
    let blocks = vec![
        place(addr(LDM, 0), ThreadRole::Ldm, flood(addr(TC, 0)), |_, _| {}),
        place(addr(TC, 0), ThreadRole::Tc, flood(addr(LDM, 0)), |_, _| {}),
    ];
    let limits = RuntimeLimits {
        queue_capacity_signals: 1,
        watchdog_interval_ms: 10,
        watchdog_stuck_ms: 100,
        ..RuntimeLimits::default()
    };
    let runtime = Runtime::new(node(ME), &layout(), blocks, limits).expect("valid");
    let (running, _, control) = start(runtime);
    let reported = |name: &str| {
        control
            .events()
            .iter()
            .any(|event| matches!(event, ControlEvent::Watchdog { thread, .. } if thread == name))
    };
    assert!(wait_until(|| reported("ldm0") && reported("tc0")));
    running.stop();
}

/// File requests (`Context::io`) run on an `io` thread, never on the
/// block's own, while the block goes on executing signals; each comes back
/// as `FsConf` with its number and its error.
#[test]
fn file_requests_run_on_io_threads_and_answer_with_fs_conf() {
    const REQUESTS: u64 = 8;
    let ldm = addr(LDM, 0);
    let ran_on: Arc<Mutex<Vec<String>>> = Arc::default();
    let confs: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
    let release = Arc::new(AtomicBool::new(false));
    let pings = Arc::new(AtomicU64::new(0));
    let (ran, seen, gate, pinged) = (
        Arc::clone(&ran_on),
        Arc::clone(&confs),
        Arc::clone(&release),
        Arc::clone(&pings),
    );
    let blocks = vec![place(
        ldm,
        ThreadRole::Ldm,
        move |ctx| {
            for request in 0..REQUESTS {
                let (ran, gate) = (Arc::clone(&ran), Arc::clone(&gate));
                ctx.io(
                    request,
                    Box::new(move || {
                        // A slow disk: the sync waits until the test lets it go.
                        let deadline = std::time::Instant::now() + WAIT_MAX;
                        while !gate.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                            std::thread::sleep(POLL);
                        }
                        let me = std::thread::current().name().unwrap_or("").to_string();
                        ran.lock().expect("not poisoned").push(me);
                        if request % 2 == 0 {
                            Ok(())
                        } else {
                            Err(format!("request {request} failed"))
                        }
                    }),
                );
            }
            ctx.send(ctx.me(), heartbeat(0));
        },
        move |signal, ctx| match signal.body {
            SignalBody::FsConf { request, error } => {
                assert_eq!(signal.sender.block, BlockNumber::FILE_SYSTEM);
                seen.lock().expect("not poisoned").push((request, error));
            }
            SignalBody::Heartbeat { view_id } => {
                // The block's thread is free while the requests wait.
                pinged.fetch_add(1, Ordering::SeqCst);
                if view_id < 100 {
                    ctx.send(ctx.me(), heartbeat(view_id + 1));
                }
            }
            _ => {}
        },
    )];
    let runtime = Runtime::new(node(ME), &layout(), blocks, quiet_limits()).expect("built");
    let (running, _, _) = start(runtime);
    assert!(
        wait_until(|| pings.load(Ordering::SeqCst) == 101),
        "the block runs on while its file requests wait"
    );
    assert!(confs.lock().expect("not poisoned").is_empty());
    release.store(true, Ordering::SeqCst);
    assert!(wait_until(
        || confs.lock().expect("not poisoned").len() == REQUESTS as usize
    ));
    running.stop();
    let mut confs = confs.lock().expect("not poisoned").clone();
    confs.sort();
    for (request, (number, error)) in confs.iter().enumerate() {
        assert_eq!(*number, request as u64);
        assert_eq!(error.is_empty(), request % 2 == 0, "{error}");
    }
    let ran_on = ran_on.lock().expect("not poisoned");
    assert_eq!(ran_on.len(), REQUESTS as usize);
    // Two ldm threads in the layout: two io threads, io0 and io1.
    assert!(
        ran_on.iter().all(|name| name == "io0" || name == "io1"),
        "{ran_on:?}"
    );
}
