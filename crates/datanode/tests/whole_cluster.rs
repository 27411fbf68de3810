//! The whole cluster in the deterministic simulator (datanode::simulation::cluster).

use datanode::simulation::cluster::{whole_scenario, FaultKind, ScenarioOptions};

#[test]
#[ignore]
fn explore() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let mut options = ScenarioOptions {
        rounds: env("ROUNDS", 2) as u32,
        ..ScenarioOptions::default()
    };
    if let Ok(kinds) = std::env::var("KINDS") {
        options.kinds = kinds
            .split(',')
            .map(|k| FaultKind::parse(k).unwrap())
            .collect();
    }
    if env("NODES", 0) > 0 {
        options.shape = Some((env("NODES", 0) as u8, env("REPLICAS", 2) as u8));
    }
    for seed in env("FROM", 1)..env("FROM", 1) + env("N", 4) {
        let t = std::time::Instant::now();
        options.trace = env("TRACE", 0) > 0;
        let (r, lines) = whole_scenario(seed, &options);
        if options.trace {
            std::fs::write(format!("/tmp/wt-sim/trace-{seed}.txt"), lines.join("\n")).unwrap();
        }
        println!(
            "seed {seed} {}x{}: {:?} steps {} sim {:.1}s wall {:.2}s stats {:?} checks {} faults {:?}",
            r.data_nodes, r.replicas, r.result, r.steps, r.sim_time.as_secs_f64(), t.elapsed().as_secs_f64(), r.stats, r.replica_checks, r.faults
        );
    }
}
