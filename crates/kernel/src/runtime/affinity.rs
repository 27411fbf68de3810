//! CPU binding and scheduling policy of a runtime thread, as its
//! `ThreadConfig` entry asks (`cpubind`, `cpuset`, `realtime`) and
//! `BatchScheduling` says. These are
//! requests to the operating system: when it refuses (no privilege, a CPU
//! that does not exist, another OS), the thread says so in the log and runs
//! unbound — a node that starts slower beats a node that does not start.

use crate::thread_config::ThreadSpec;

/// Applies `spec`'s CPU options to the calling thread.
pub(crate) fn apply_to_current_thread(spec: &ThreadSpec) {
    if let Some(cpu) = spec.cpubind {
        bind_to_cpus(&spec.name, &[cpu]);
    } else if let Some(cpus) = &spec.cpuset {
        bind_to_cpus(&spec.name, cpus);
    }
    if spec.realtime {
        use_realtime_scheduling(&spec.name);
    } else if spec.batch {
        use_batch_scheduling(&spec.name);
    }
}

/// Puts the calling thread (and the threads it starts after, which
/// inherit it) under Linux's `SCHED_BATCH`: the same share of the CPUs as
/// a normal thread, but a wake-up does not preempt the thread running on
/// the CPU; the woken one runs when that one sleeps or at its tick.
///
/// Why: a data node, a SQL node and their clients sharing a few CPUs hand
/// each other work through sockets, and every hand-over wakes the other
/// side. Under the normal policy the woken thread preempts the sender in
/// the middle of its batch; under the batch policy the sender finishes its
/// batch first. With both the SQL node and the data node under it, on a
/// 2-CPU host with sysbench, `oltp_read_write` gained 1-13 % and
/// `oltp_point_select` at 8 threads 2-8 % with a lower p95; but a data
/// node under it served native API clients on the same CPUs 3-12 % slower
/// (docs/architecture.md), so it is a switch, off by default (`skarv
/// sandbox` turns it on when it runs SQL nodes). Lowering the policy needs
/// no privilege; a refusal is logged and the thread keeps the normal
/// policy.
#[cfg(target_os = "linux")]
pub fn use_batch_scheduling(thread: &str) {
    // SAFETY: sched_param is plain data; the batch policy takes priority 0.
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_self() is the calling thread, `param` a valid sched_param.
    let rc =
        unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_BATCH, &param) };
    if rc != 0 {
        let error = std::io::Error::from_raw_os_error(rc);
        tracing::warn!(thread, %error, "cannot use batch scheduling; the thread keeps normal scheduling");
    }
}

#[cfg(not(target_os = "linux"))]
pub fn use_batch_scheduling(_thread: &str) {}

/// Whether the calling thread runs under the batch policy (for tests and
/// diagnostics).
#[cfg(target_os = "linux")]
pub fn batch_scheduled() -> bool {
    // SAFETY: a query of the calling thread's own policy.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_BATCH }
}

#[cfg(not(target_os = "linux"))]
pub fn batch_scheduled() -> bool {
    false
}

#[cfg(target_os = "linux")]
fn bind_to_cpus(thread: &str, cpus: &[usize]) {
    let cpu_set_size = libc::CPU_SETSIZE as usize;
    if cpus.is_empty() {
        tracing::warn!(thread, "empty CPU set; the thread runs unbound");
        return;
    }
    if let Some(cpu) = cpus.iter().find(|cpu| **cpu >= cpu_set_size) {
        tracing::warn!(
            thread,
            cpu,
            cpu_set_size,
            "CPU number beyond what the OS can bind to; the thread runs unbound"
        );
        return;
    }
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in cpus {
        // SAFETY: `cpu < CPU_SETSIZE` was checked above, so the bit is inside `set`.
        unsafe { libc::CPU_SET(*cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        let error = std::io::Error::last_os_error();
        tracing::warn!(thread, ?cpus, %error, "cannot bind thread to CPUs; it runs unbound");
    }
}

#[cfg(not(target_os = "linux"))]
fn bind_to_cpus(thread: &str, cpus: &[usize]) {
    tracing::warn!(
        thread,
        ?cpus,
        "CPU binding is supported on Linux only; the thread runs unbound"
    );
}

#[cfg(target_os = "linux")]
fn use_realtime_scheduling(thread: &str) {
    // SAFETY: a pure query of a constant of the OS.
    let priority = unsafe { libc::sched_get_priority_min(libc::SCHED_FIFO) };
    if priority < 0 {
        let error = std::io::Error::last_os_error();
        tracing::warn!(thread, %error, "no real-time priority range; the thread keeps normal scheduling");
        return;
    }
    // SAFETY: sched_param is plain data; zeroed fills any fields beyond the priority.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority;
    // SAFETY: pthread_self() is the calling thread, `param` a valid sched_param.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc != 0 {
        let error = std::io::Error::from_raw_os_error(rc);
        tracing::warn!(thread, %error, "cannot use real-time scheduling; the thread keeps normal scheduling");
    }
}

#[cfg(not(target_os = "linux"))]
fn use_realtime_scheduling(thread: &str) {
    tracing::warn!(thread, "real-time scheduling is supported on Linux only");
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::thread_config::{SpinMethod, ThreadRole};

    fn spec(batch: bool) -> ThreadSpec {
        ThreadSpec {
            name: "ldm".to_owned(),
            role: ThreadRole::Ldm,
            index: 0,
            hosts: vec![ThreadRole::Ldm],
            cpubind: None,
            cpuset: None,
            realtime: false,
            batch,
            spintime_us: 0,
            spintime_given: false,
            spin_method: SpinMethod::Static,
        }
    }

    /// The policy is the thread's own (and its children's), not the
    /// process's: a thread that asks for it has it, one that does not
    /// keeps the normal policy.
    #[test]
    fn a_batch_thread_runs_under_sched_batch_and_others_do_not() {
        let (batch, child) = std::thread::spawn(|| {
            apply_to_current_thread(&spec(true));
            let child = std::thread::spawn(batch_scheduled).join().expect("child");
            (batch_scheduled(), child)
        })
        .join()
        .expect("thread");
        assert!(batch, "the thread asked for the batch policy");
        assert!(child, "a thread it starts inherits the policy");
        let normal = std::thread::spawn(|| {
            apply_to_current_thread(&spec(false));
            batch_scheduled()
        })
        .join()
        .expect("thread");
        assert!(!normal, "a thread that did not ask keeps the normal policy");
    }
}
