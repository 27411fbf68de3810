//! CPU binding and real-time scheduling of a runtime thread, as its
//! `ThreadConfig` entry asks (`cpubind`, `cpuset`, `realtime`). These are
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
    }
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
