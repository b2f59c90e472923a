//! Fuzzing on stable Rust: the targets (`targets.rs`), a mutation fuzzer
//! (`mutate.rs`) and an allocator that counts (`alloc.rs`), so that a run
//! fails on a panic *or* on an input that made a target allocate past its
//! limit. `switchboard-fuzz` runs them long; the test below runs each a
//! bounded number of times on every `cargo test`.

pub mod alloc;
pub mod mutate;
pub mod targets;

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use targets::Target;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// What a run found wrong, with the input that did it.
#[derive(Debug)]
pub struct Finding {
    pub target: &'static str,
    pub iteration: u64,
    pub problem: String,
    pub input: Vec<u8>,
}

/// How a run went.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub executions: u64,
    pub elapsed: Duration,
    /// The most any one input made the target allocate.
    pub peak_alloc: usize,
}

/// Runs `target` once on `input`: the most bytes it had allocated at
/// once, or what went wrong (a panic, or more than its limit).
pub fn check(target: &Target, input: &[u8]) -> Result<usize, String> {
    let base = alloc::live();
    alloc::reset_peak();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    let used = alloc::peak().saturating_sub(base);
    let limit = (target.alloc_limit)(input.len());
    match outcome {
        Err(panic) => Err(format!(
            "panicked: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()
        )),
        Ok(()) if used > limit => Err(format!(
            "allocated {used} bytes for a {}-byte input (limit {limit})",
            input.len()
        )),
        Ok(()) => Ok(used),
    }
}

/// Runs `target` on its seeds and `iterations` mutated inputs made from
/// `seed`. Stops at the first panic or allocation past the limit.
pub fn run(target: &Target, iterations: u64, seed: u64) -> Result<Stats, Box<Finding>> {
    let corpus = (target.seeds)();
    let mut rng = mutate::Rng::new(seed);
    let started = Instant::now();
    let mut peak_alloc = 0;
    let total = corpus.len() as u64 + iterations;
    for iteration in 0..total {
        let input = match corpus.get(iteration as usize) {
            Some(seed_input) => seed_input.clone(),
            None => mutate::next_input(&mut rng, &corpus, target.max_input),
        };
        match check(target, &input) {
            Ok(used) => peak_alloc = peak_alloc.max(used),
            Err(problem) => {
                return Err(Box::new(Finding {
                    target: target.name,
                    iteration,
                    problem,
                    input,
                }));
            }
        }
    }
    Ok(Stats {
        executions: total,
        elapsed: started.elapsed(),
        peak_alloc,
    })
}

/// What tests that read the allocation counters share.
#[cfg(test)]
pub(crate) mod testing {
    /// The counters are the process's: tests that read them take turns.
    static COUNTERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub(crate) fn counters() -> std::sync::MutexGuard<'static, ()> {
        COUNTERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The target named `name`.
    pub(crate) fn target(name: &str) -> &'static crate::targets::Target {
        match crate::targets::by_name(name) {
            Some(t) => t,
            None => panic!("no target {name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::counters;

    /// The bounded run of CI: every target, a fixed seed, a few seconds.
    /// `switchboard-fuzz` runs the long ones (README, "Fuzzing").
    #[test]
    fn every_target_survives_a_bounded_run() {
        let _turn = counters();
        // Panics are the findings: keep their messages out of the output.
        std::panic::set_hook(Box::new(|_| {}));
        let mut findings = Vec::new();
        for target in targets::TARGETS {
            match run(target, 20_000, 0x5eed) {
                Ok(stats) => eprintln!("{}: {stats:?}", target.name),
                Err(finding) => findings.push(finding),
            }
        }
        let _ = std::panic::take_hook();
        assert!(findings.is_empty(), "{findings:#?}");
    }

    #[test]
    fn the_allocator_counts_what_a_target_allocates() {
        let _turn = counters();
        // Large beside whatever the test harness's own threads allocate or
        // free meanwhile (the counters are the whole process's).
        const BIG: usize = 64 << 20;
        let base = alloc::live();
        alloc::reset_peak();
        let big = vec![1u8; BIG];
        assert!(alloc::peak().saturating_sub(base) >= BIG / 2);
        assert_eq!(big.len(), BIG);
    }
}
