//! The POSIX calls std does not offer: two that `switchboard dev` needs,
//! and the process's CPU time for the benchmarks.
//! This is the only module allowed `unsafe`.
#![allow(unsafe_code)]

use std::io;

/// Makes the kernel send SIGTERM to the child when the thread that spawns
/// it dies, so a `switchboard dev` killed with -9 does not leave its
/// nats-server running.
#[cfg(target_os = "linux")]
pub fn die_with_parent(command: &mut tokio::process::Command) {
    // SAFETY: the closure runs between fork and exec and makes a single
    // prctl call, which is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub fn die_with_parent(_command: &mut tokio::process::Command) {}

/// Sends SIGTERM to `pid` (a graceful stop; tokio only offers SIGKILL).
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: kill(2) only takes integers.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// This process's CPU time so far, user and system, to the microsecond
/// (`/proc`'s ticks are 10 ms).
pub fn cpu_time() -> std::time::Duration {
    // SAFETY: getrusage writes the struct it is given and nothing else; a
    // zeroed `rusage` is a valid value of it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let of = |t: libc::timeval| {
        std::time::Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + std::time::Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    of(usage.ru_utime) + of(usage.ru_stime)
}
