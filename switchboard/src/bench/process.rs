//! A server process's memory and CPU time, read from /proc (Linux), for
//! the load generator's report.

use std::time::Duration;

/// Resident and peak memory of a process, in KiB, from /proc.
pub(super) fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resident and peak memory of every process in `pids` together, in KiB
/// (`None` if one cannot be read).
pub(super) fn memory_of(pids: &[u32]) -> Option<(u64, u64)> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().try_fold((0, 0), |(rss, hwm), pid| {
        let (r, h) = memory_kib(*pid)?;
        Some((rss + r, hwm + h))
    })
}

/// `pids` and their direct children (listed per thread by the kernel).
pub(super) fn and_children(pids: &[u32]) -> Vec<u32> {
    let mut out = pids.to_vec();
    for pid in pids {
        let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for thread in threads.flatten() {
            let children =
                std::fs::read_to_string(thread.path().join("children")).unwrap_or_default();
            out.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// CPU time of one process (all its threads), from /proc/<pid>/stat.
#[derive(Clone)]
pub(super) struct ProcessCpu {
    pub pid: u32,
    /// The command name the kernel keeps (`comm`).
    pub name: String,
    pub user: Duration,
    pub system: Duration,
}

impl ProcessCpu {
    pub fn total(&self) -> Duration {
        self.user + self.system
    }

    /// What this process spent since `earlier`, a reading of the same pid.
    pub fn since(&self, earlier: &ProcessCpu) -> ProcessCpu {
        ProcessCpu {
            pid: self.pid,
            name: self.name.clone(),
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// CPU time (user and system, all threads) of each process in `pids`
/// (`None` if one cannot be read).
pub(super) fn cpu_times(pids: &[u32]) -> Option<Vec<ProcessCpu>> {
    // Linux reports these in USER_HZ ticks, 100 per second on every
    // architecture it runs on here (it is part of the ABI, not the kernel's
    // HZ).
    const TICKS_PER_SECOND: u64 = 100;
    let ticks = |t: u64| Duration::from_millis(t * 1000 / TICKS_PER_SECOND);
    if pids.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(pids.len());
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces: count from after it.
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let name = stat.get(open + 1..close)?.to_owned();
        let rest = &stat[close + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15; `rest` starts at field 3.
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        out.push(ProcessCpu {
            pid: *pid,
            name,
            user: ticks(utime),
            system: ticks(stime),
        });
    }
    Some(out)
}
