//! The sysfile write of a global checkpoint (`GcpKeepReq`) runs on an io
//! thread: the distribution block's thread (which runs the LDM instance
//! with `ldm=0`) goes on meanwhile, and the master and the local LDMs hear
//! of the GCI only once the sysfile holding it is durable. A sysfile that
//! cannot be written (a full disk) is tried again, with an alarm, and never
//! restarts the node.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use datanode::distribution::{sysfile, Distribution, DistributionConfig};
use kernel::simulator::{IoSettings, Simulation};
use kernel::{Block, Context};
use signal::{BlockNumber, BlockRef, NodeBitmask, NodeId, Signal, SignalBody};
use storage::disk::SimDisk;

type Log = Arc<Mutex<Vec<SignalBody>>>;

struct Recorder(Log);

impl Block for Recorder {
    fn execute(&mut self, signal: Signal, _ctx: &mut Context<'_>) {
        self.0.lock().unwrap().push(signal.body);
    }
}

#[test]
fn a_gci_is_reported_kept_only_once_its_sysfile_is_durable() {
    let node = NodeId::new(1).unwrap();
    let master = BlockRef::new(node, BlockNumber(9), 0);
    let ldm = BlockRef::new(node, BlockNumber::LOCAL_DATA_MANAGER, 0);
    let disk = SimDisk::new(3);
    let fs_dir = std::path::PathBuf::from("/data/ndb_1_fs");
    let log: Log = Arc::default();
    let mut sim = Simulation::new(3);
    let slow = Duration::from_millis(50);
    sim.io = IoSettings {
        latency_min: slow,
        latency_max: slow,
    };
    let (factory_disk, factory_dir, factory_log) = (disk.clone(), fs_dir.clone(), log.clone());
    sim.add_node(
        node,
        Box::new(move |n, _| {
            let distribution = Distribution::new(DistributionConfig {
                node: n,
                gcp_interval: Duration::from_secs(3600),
                gcp_stop_timeout: Duration::ZERO,
                epoch_interval: Duration::ZERO,
                tc_instances: 1,
                ldm_instances: 1,
            })
            .with_sysfile(
                Box::new(factory_disk.clone()),
                factory_dir.clone(),
                vec![vec![n]],
            )
            .unwrap();
            let distribution: Box<dyn Block> = Box::new(distribution);
            let master_block: Box<dyn Block> = Box::new(Recorder(factory_log.clone()));
            let ldm_block: Box<dyn Block> = Box::new(Recorder(factory_log.clone()));
            vec![
                (Distribution::address(n), distribution),
                (master, master_block),
                (ldm, ldm_block),
            ]
        }),
    );
    let mut serving = NodeBitmask::new();
    serving.insert(node);
    sim.inject(Signal {
        receiver: Distribution::address(node),
        sender: master,
        body: SignalBody::GcpKeepReq {
            gci: 5,
            serving,
            incarnation: 0x1234,
        },
    });
    let reported = |log: &Log| {
        let log = log.lock().unwrap();
        (
            log.contains(&SignalBody::GcpKeepConf { gci: 5 }),
            log.contains(&SignalBody::GcpCompleteRep { gci: 5 }),
        )
    };
    sim.run_for(slow / 2);
    assert_eq!(
        reported(&log),
        (false, false),
        "not before the sysfile is written"
    );
    let distribution = sim
        .block::<Distribution>(Distribution::address(node))
        .unwrap();
    assert_eq!(distribution.kept().gci, 0);
    sim.run_for(slow);
    assert_eq!(reported(&log), (true, true), "once it is");
    let distribution = sim
        .block::<Distribution>(Distribution::address(node))
        .unwrap();
    assert_eq!(distribution.kept().gci, 5);
    disk.crash();
    assert_eq!(sysfile::read(&disk, &fs_dir).unwrap().gci, 5, "durable");
}

/// One node whose distribution block keeps a sysfile on `disk`, with
/// recorders as the GCP master, the local LDM and the management server
/// (the same node, for the test). The recorders share `log`.
fn keeping_node(disk: &SimDisk, fs_dir: &std::path::Path, log: &Log) -> (Simulation, NodeId) {
    let node = NodeId::new(1).unwrap();
    let master = BlockRef::new(node, BlockNumber(9), 0);
    let ldm = BlockRef::new(node, BlockNumber::LOCAL_DATA_MANAGER, 0);
    let management = BlockRef::new(node, BlockNumber::MANAGEMENT, 0);
    let mut sim = Simulation::new(4);
    let (factory_disk, factory_dir, factory_log) =
        (disk.clone(), fs_dir.to_path_buf(), log.clone());
    sim.add_node(
        node,
        Box::new(move |n, _| {
            let distribution = Distribution::new(DistributionConfig {
                node: n,
                gcp_interval: Duration::from_secs(3600),
                gcp_stop_timeout: Duration::ZERO,
                epoch_interval: Duration::ZERO,
                tc_instances: 1,
                ldm_instances: 1,
            })
            .with_cluster_log(Some(n))
            .with_sysfile(
                Box::new(factory_disk.clone()),
                factory_dir.clone(),
                vec![vec![n]],
            )
            .unwrap();
            let distribution: Box<dyn Block> = Box::new(distribution);
            let recorder = || -> Box<dyn Block> { Box::new(Recorder(factory_log.clone())) };
            vec![
                (Distribution::address(n), distribution),
                (master, recorder()),
                (ldm, recorder()),
                (management, recorder()),
            ]
        }),
    );
    (sim, node)
}

#[test]
fn a_full_disk_holds_the_sysfile_write_with_an_alarm_and_it_resumes_with_room() {
    let disk = SimDisk::new(4);
    let fs_dir = std::path::PathBuf::from("/data/ndb_1_fs");
    let log: Log = Arc::default();
    let (mut sim, node) = keeping_node(&disk, &fs_dir, &log);
    disk.fail_writes_after(0);
    let mut serving = NodeBitmask::new();
    serving.insert(node);
    sim.inject(Signal {
        receiver: Distribution::address(node),
        sender: BlockRef::new(node, BlockNumber(9), 0),
        body: SignalBody::GcpKeepReq {
            gci: 7,
            serving,
            incarnation: 1,
        },
    });
    // Several tries fail: long enough for the pause to reach its bound.
    sim.run_for(Duration::from_secs(12));
    let summary = sim.summary(node).unwrap();
    assert!(
        summary.up && summary.shutdowns == 0,
        "a full disk does not take the node down: {summary:?}"
    );
    let kept = |log: &Log| {
        log.lock()
            .unwrap()
            .contains(&SignalBody::GcpKeepConf { gci: 7 })
    };
    assert!(
        !kept(&log),
        "GCI 7 is not kept while its sysfile is not written"
    );
    let alarms: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|body| match body {
            SignalBody::MgmEventRep {
                severity: signal::Severity::Alert,
                text,
                ..
            } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(alarms.len(), 1, "one alarm, not one per try: {alarms:?}");
    assert!(alarms[0].contains("no space left"), "{}", alarms[0]);

    disk.allow_writes();
    // The next try comes within the longest pause.
    sim.run_for(Duration::from_secs(6));
    assert!(kept(&log), "the keep resumes once the disk has room");
    let distribution = sim
        .block::<Distribution>(Distribution::address(node))
        .unwrap();
    assert_eq!(distribution.kept().gci, 7);
    assert_eq!(sim.summary(node).unwrap().shutdowns, 0);
    disk.crash();
    assert_eq!(sysfile::read(&disk, &fs_dir).unwrap().gci, 7, "durable");
}
