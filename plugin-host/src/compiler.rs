//! Where compilations run: on the blocking pool, never on the async
//! runtime (a component takes milliseconds to seconds of CPU to compile),
//! at most `compile_concurrency` at once per process, and each answered
//! within `compile_timeout`.
//!
//! A compilation cannot be stopped midway. One that overruns its time is
//! answered as timed out and goes on to its end holding its permit, so the
//! bound on concurrency holds even then: a tenant's slow component delays
//! the next compilation, never adds to the CPU compiling at once.
//!
//! wasmtime compiles a component's functions in parallel on rayon, by
//! default on rayon's one global pool, whose queue would put a small
//! component's functions behind every function of a large one compiling
//! at the same time (a JavaScript engine: tens of seconds). So each
//! permit has a rayon pool of its own, and compilations at once share the
//! CPU rather than a queue.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::metrics;

/// How long a compilation may wait for a free compiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// As long as it takes: versions being activated, which must load
    /// however many tenants' versions are queued before them.
    Patient,
    /// At most the compile timeout: a deploy, whose admin waits for the
    /// answer.
    Bounded,
}

#[derive(Debug, thiserror::Error)]
pub enum CompilerError {
    #[error("every compiler of this process has been busy for {0:?}; retry in a moment")]
    Busy(Duration),
    #[error("compiling took longer than {0:?} (compile_timeout_ms)")]
    TimedOut(Duration),
    /// The compiling task did not finish (it panicked).
    #[error("the compiling task failed: {0}")]
    Join(#[source] tokio::task::JoinError),
}

pub struct Compiler {
    permits: Arc<Semaphore>,
    /// The rayon pools of the permits not taken (one per permit; empty
    /// when they could not be started, and then rayon's global pool
    /// compiles).
    pools: Arc<Mutex<Vec<rayon::ThreadPool>>>,
    timeout: Duration,
}

impl Compiler {
    pub fn new(concurrency: usize, timeout: Duration) -> Self {
        let concurrency = concurrency.max(1);
        let pools = (0..concurrency)
            .map(|i| {
                rayon::ThreadPoolBuilder::new()
                    .thread_name(move |t| format!("plugin-compile-{i}-{t}"))
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot start the plugin compilers' threads; compiling on the global pool");
                Vec::new()
            });
        Self {
            permits: Arc::new(Semaphore::new(concurrency)),
            pools: Arc::new(Mutex::new(pools)),
            timeout,
        }
    }

    /// Runs `work` (a compilation) on the blocking pool when a compiler is
    /// free.
    pub async fn run<R: Send + 'static>(
        &self,
        wait: Wait,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, CompilerError> {
        let permits = self.permits.clone();
        let permit = match wait {
            Wait::Patient => permits.acquire_owned().await,
            Wait::Bounded => tokio::time::timeout(self.timeout, permits.acquire_owned())
                .await
                .map_err(|_| CompilerError::Busy(self.timeout))?,
        };
        // The semaphore is never closed.
        let Ok(permit) = permit else {
            return Err(CompilerError::Busy(Duration::ZERO));
        };
        let started = Instant::now();
        let pools = self.pools.clone();
        let task = tokio::task::spawn_blocking(move || {
            // There are as many pools as permits: one is free.
            let pool = pools.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let result = match &pool {
                Some(pool) => pool.install(work),
                None => work(),
            };
            if let Some(pool) = pool {
                pools.lock().unwrap_or_else(|p| p.into_inner()).push(pool);
            }
            drop(permit);
            result
        });
        let outcome = tokio::time::timeout(self.timeout, task).await;
        metrics::compiled(started.elapsed(), outcome.is_err());
        outcome
            .map_err(|_| CompilerError::TimedOut(self.timeout))?
            .map_err(CompilerError::Join)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Runs `jobs` compilations of `each` at once through `compiler` and
    /// returns how many ran together at most, and their results.
    async fn overlap(
        compiler: Arc<Compiler>,
        jobs: usize,
        each: Duration,
        wait: Wait,
    ) -> (usize, Vec<Result<(), CompilerError>>) {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..jobs)
            .map(|_| {
                let (compiler, running, most) = (compiler.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    compiler
                        .run(wait, move || {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(each);
                            running.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await
                })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        (most.load(Ordering::SeqCst), results)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_the_concurrency_compiles_at_once() {
        let compiler = Arc::new(Compiler::new(2, Duration::from_secs(10)));
        let (most, results) = overlap(compiler, 5, Duration::from_millis(100), Wait::Patient).await;
        assert_eq!(most, 2, "two at once, not more");
        assert!(results.iter().all(Result::is_ok));

        let one = Arc::new(Compiler::new(1, Duration::from_secs(10)));
        let (most, _) = overlap(one, 3, Duration::from_millis(50), Wait::Patient).await;
        assert_eq!(most, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_compilation_past_its_time_is_answered_and_keeps_its_permit() {
        let compiler = Arc::new(Compiler::new(1, Duration::from_millis(200)));
        // Within the bound: answered with its result.
        let quick = compiler.run(Wait::Bounded, || 7).await;
        assert_eq!(quick.unwrap(), 7);
        // Past it: timed out, while the work goes on to its end.
        let started = Instant::now();
        let slow = compiler
            .run(Wait::Bounded, || {
                std::thread::sleep(Duration::from_millis(600))
            })
            .await;
        assert!(matches!(slow, Err(CompilerError::TimedOut(_))), "{slow:?}");
        assert!(started.elapsed() < Duration::from_millis(500));
        // Its permit is still held: a deploy waiting its bound is busy...
        let next = compiler.run(Wait::Bounded, || ()).await;
        assert!(matches!(next, Err(CompilerError::Busy(_))), "{next:?}");
        // ...and a patient load runs once the slow one has ended.
        assert!(compiler.run(Wait::Patient, || ()).await.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(600));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_compilation_does_not_queue_behind_a_large_ones_parallel_work() {
        use rayon::prelude::*;
        let compiler = Arc::new(Compiler::new(2, Duration::from_secs(30)));
        // A large one: 200 parallel pieces of 10 ms (about a second on its
        // pool's threads), as wasmtime splits a component by function.
        let large = {
            let compiler = compiler.clone();
            tokio::spawn(async move {
                compiler
                    .run(Wait::Patient, || {
                        (0..200)
                            .into_par_iter()
                            .for_each(|_| std::thread::sleep(Duration::from_millis(10)))
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A small one started meanwhile ends in its own time, not after
        // the large one's pieces (on one shared pool it waited for them).
        let started = Instant::now();
        compiler
            .run(Wait::Patient, || {
                (0..4)
                    .into_par_iter()
                    .for_each(|_| std::thread::sleep(Duration::from_millis(10)))
            })
            .await
            .unwrap();
        let small = started.elapsed();
        assert!(small < Duration::from_millis(400), "{small:?}");
        assert!(!large.is_finished(), "the large one is still compiling");
        large.await.unwrap().unwrap();
    }
}
