//! The sysfile write of a global checkpoint (`GcpKeepReq`) runs on an io
//! thread: the distribution block's thread (which runs the LDM instance
//! with `ldm=0`) goes on meanwhile, and the master and the local LDMs hear
//! of the GCI only once the sysfile holding it is durable.

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
