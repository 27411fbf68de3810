//! A real sandbox for the tests of the crates that link no `skarv` binary
//! themselves (the client, the SQL engine): the `skarv` binary of this build
//! (`cargo build -p skarv` first, or `SKARV_BIN`), started detached in a
//! scratch directory on a free port range, with no SQL node (these tests
//! drive the cluster, or the engine in process), stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Ports a sandbox takes from its base: the mgmd, data nodes, spares.
const SANDBOX_PORTS: u16 = 8;

/// The directory of the test's own profile (`target/debug`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

pub fn skarv_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("SKARV_BIN") {
        return PathBuf::from(bin);
    }
    let bin = profile_dir().join("skarv");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p skarv` first (or set SKARV_BIN)",
        bin.display()
    );
    bin
}

pub fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub struct Sandbox {
    pub dir: PathBuf,
    pub connect: String,
}

impl Sandbox {
    /// `data_nodes` data nodes of `replicas` replicas, on a port range
    /// starting at `port_range_start`.
    pub fn start(name: &str, data_nodes: u32, replicas: u32, port_range_start: u16) -> Sandbox {
        Sandbox::start_with(name, data_nodes, replicas, port_range_start, &[])
    }

    /// `start`, with `skarv sandbox`'s further arguments `extra` (e.g.
    /// `--set NAME=VALUE`).
    pub fn start_with(
        name: &str,
        data_nodes: u32,
        replicas: u32,
        port_range_start: u16,
        extra: &[&str],
    ) -> Sandbox {
        let dir = std::env::temp_dir().join(format!("skarv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let base = crate::ports::free_base_port(port_range_start, 1_000, SANDBOX_PORTS);
        let output = Command::new(skarv_bin())
            .args(["sandbox", "--detach", "--dir"])
            .arg(&dir)
            .args(["--data-nodes", &data_nodes.to_string()])
            .args(["--replicas", &replicas.to_string()])
            .args(["--base-port", &base.to_string()])
            // These tests drive the cluster or the engine in process.
            .args(["--sql-nodes", "0"])
            .args(extra)
            .output()
            .expect("run skarv sandbox");
        let sandbox = Sandbox {
            dir,
            connect: format!("127.0.0.1:{base}"),
        };
        assert!(output.status.success(), "{}", text(&output));
        sandbox
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new(skarv_bin())
            .args(["sandbox", "--stop", "--dir"])
            .arg(&self.dir)
            .output();
        if std::thread::panicking() {
            eprintln!("sandbox logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
