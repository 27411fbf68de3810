//! File requests in the simulator: each runs after a latency the seed
//! draws, so the seed chooses the order in which they complete; the same
//! seed gives the same order; a node that goes down before a request ran
//! never runs it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kernel::simulator::Simulation;
use kernel::{Block, Context};
use signal::{BlockNumber, BlockRef, NodeId, Signal, SignalBody};

const REQUESTS: u64 = 6;

type Log = Arc<Mutex<Vec<String>>>;

/// Issues `REQUESTS` file requests at start; logs when each job runs and
/// when its `FsConf` arrives.
struct Issuer {
    log: Log,
}

impl Block for Issuer {
    fn start(&mut self, ctx: &mut Context<'_>) {
        for request in 0..REQUESTS {
            let log = Arc::clone(&self.log);
            ctx.io(
                request,
                Box::new(move || {
                    log.lock().unwrap().push(format!("ran {request}"));
                    Ok(())
                }),
            );
        }
    }

    fn execute(&mut self, signal: Signal, _ctx: &mut Context<'_>) {
        if let SignalBody::FsConf { request, error } = signal.body {
            assert_eq!(signal.sender.block, BlockNumber::FILE_SYSTEM);
            assert!(error.is_empty());
            self.log.lock().unwrap().push(format!("conf {request}"));
        }
    }
}

fn run(seed: u64, crash_at: Option<Duration>) -> Vec<String> {
    let log: Log = Arc::default();
    let mut sim = Simulation::new(seed);
    let node = NodeId::new(1).unwrap();
    let block_log = Arc::clone(&log);
    sim.add_node(
        node,
        Box::new(move |n, _| {
            let address = BlockRef::new(n, BlockNumber::LOCAL_DATA_MANAGER, 0);
            let block: Box<dyn Block> = Box::new(Issuer {
                log: Arc::clone(&block_log),
            });
            vec![(address, block)]
        }),
    );
    if let Some(at) = crash_at {
        sim.run_for(at);
        sim.crash(node);
    }
    sim.run_for(Duration::from_millis(10));
    let lines = log.lock().unwrap().clone();
    lines
}

/// The order in which the requests completed.
fn order(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.starts_with("conf"))
        .cloned()
        .collect()
}

#[test]
fn every_request_runs_once_then_answers_in_an_order_the_seed_chooses() {
    let mut orders = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let lines = run(seed, None);
        assert_eq!(lines.len(), 2 * REQUESTS as usize, "{lines:?}");
        for request in 0..REQUESTS {
            let ran = lines.iter().position(|l| *l == format!("ran {request}"));
            let conf = lines.iter().position(|l| *l == format!("conf {request}"));
            assert!(ran.unwrap() < conf.unwrap(), "{lines:?}");
        }
        assert_eq!(lines, run(seed, None), "seed {seed} replays");
        orders.insert(order(&lines));
    }
    assert!(
        orders.len() > 1,
        "the seeds chose one order only: {orders:?}"
    );
}

#[test]
fn requests_of_a_node_that_crashed_before_they_ran_never_run() {
    let lines = run(7, Some(Duration::ZERO));
    assert!(lines.is_empty(), "{lines:?}");
}
