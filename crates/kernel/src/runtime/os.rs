//! What the kernel keeps of this process's threads: CPU time and context
//! switches from `/proc/self/task/<tid>/` (what `getrusage(RUSAGE_THREAD)`
//! gives, but readable from another thread). ndbinfo's `threadstat` shows
//! them; the watchdog samples them for `cpustat`.

/// What the kernel keeps of one thread of this process (`threadstat`'s
/// `os_*` columns): CPU time in microseconds and context switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OsThreadFigures {
    pub utime_us: u64,
    pub stime_us: u64,
    /// Voluntary (it waited) and involuntary (preempted) context switches.
    pub nvcsw: u64,
    pub nivcsw: u64,
}

/// Thread `tid` of this process as `/proc/self/task/<tid>/` shows it (what
/// `getrusage(RUSAGE_THREAD)` gives, but readable from another thread);
/// `None` when the thread is gone or the files cannot be read.
pub fn os_thread_figures(tid: u64) -> Option<OsThreadFigures> {
    if tid == 0 {
        return None;
    }
    let dir = format!("/proc/self/task/{tid}");
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
    let (utime_ticks, stime_ticks) = parse_stat_times(&stat)?;
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|t| *t > 0)?;
    let field = |name: &str| {
        status.lines().find_map(|line| {
            let value = line.strip_prefix(name)?.strip_prefix(':')?;
            value.trim().parse::<u64>().ok()
        })
    };
    Some(OsThreadFigures {
        utime_us: utime_ticks * 1_000_000 / ticks_per_s,
        stime_us: stime_ticks * 1_000_000 / ticks_per_s,
        nvcsw: field("voluntary_ctxt_switches").unwrap_or(0),
        nivcsw: field("nonvoluntary_ctxt_switches").unwrap_or(0),
    })
}

/// `utime` and `stime` (fields 14 and 15, clock ticks) of a
/// `/proc/<pid>/task/<tid>/stat` line. The name (field 2) is in
/// parentheses and may hold spaces and parentheses: fields are counted
/// from the last `)`.
fn parse_stat_times(stat: &str) -> Option<(u64, u64)> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name: utime is the 12th from it.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime = fields.next()?.parse().ok()?;
    let stime = fields.next()?.parse().ok()?;
    Some((utime, stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_times_are_fields_14_and_15_whatever_the_name() {
        let stat = "4242 (ldm 0 (x)) S 1 2 3 4 5 6 7 8 9 10 111 222 13 14 20 0 1 0";
        assert_eq!(parse_stat_times(stat), Some((111, 222)));
        assert_eq!(parse_stat_times("4242 (cut"), None);
    }

    #[test]
    fn this_thread_uses_cpu_as_proc_tells() {
        // SAFETY: gettid has no preconditions.
        let tid = u64::try_from(unsafe { libc::gettid() }).unwrap();
        let before = os_thread_figures(tid).expect("own thread readable");
        // Spin until the kernel has charged a tick of CPU to this thread.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut x = 0u64;
        loop {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            let now = os_thread_figures(tid).expect("own thread readable");
            if now.utime_us + now.stime_us > before.utime_us + before.stime_us {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no CPU charged: {x}");
        }
        assert_eq!(os_thread_figures(0), None);
    }
}
