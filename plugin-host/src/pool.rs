//! Threads that run work queued per tenant, so that no tenant's work can
//! starve another's: each tenant has its own bounded queue, tenants take
//! turns, and a tenant's jobs run one at a time. With `threads` threads, a
//! tenant whose queue is full still takes at most one of them, and
//! another tenant's job waits at most for the jobs running now and one
//! job of each tenant ahead of it in turn.
//!
//! [`FairQueue`] is the rule on plain data (no threads, no clock);
//! [`Pool`] runs it on threads. Shadow comparisons run here (`shadow.rs`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use switchboard_protocol::TenantId;

/// Jobs waiting per tenant, and the order in which tenants take turns.
pub(crate) struct FairQueue<J> {
    queues: HashMap<TenantId, VecDeque<J>>,
    /// Tenants with a job waiting and none running, in turn order.
    turns: VecDeque<TenantId>,
    /// Tenants with a job running now.
    running: HashSet<TenantId>,
    queued: usize,
    max_queued: usize,
    max_per_tenant: usize,
}

impl<J> FairQueue<J> {
    pub(crate) fn new(max_queued: usize, max_per_tenant: usize) -> Self {
        Self {
            queues: HashMap::new(),
            turns: VecDeque::new(),
            running: HashSet::new(),
            queued: 0,
            max_queued: max_queued.max(1),
            max_per_tenant: max_per_tenant.max(1),
        }
    }

    /// Queues `job`, or gives it back when the tenant's queue or the
    /// whole queue is full.
    pub(crate) fn push(&mut self, tenant: &TenantId, job: J) -> Result<(), J> {
        if self.queued >= self.max_queued {
            return Err(job);
        }
        let queue = self.queues.entry(tenant.clone()).or_default();
        if queue.len() >= self.max_per_tenant {
            return Err(job);
        }
        queue.push_back(job);
        self.queued += 1;
        if queue.len() == 1 && !self.running.contains(tenant) {
            self.turns.push_back(tenant.clone());
        }
        Ok(())
    }

    /// The next tenant's oldest job. The tenant then counts as running
    /// until [`FairQueue::done`]: its other jobs wait for that.
    pub(crate) fn next(&mut self) -> Option<(TenantId, J)> {
        let tenant = self.turns.pop_front()?;
        let job = self.queues.get_mut(&tenant)?.pop_front()?;
        self.queued -= 1;
        self.running.insert(tenant.clone());
        Some((tenant, job))
    }

    /// The tenant's running job has ended: its next one, if any, waits
    /// for its turn behind the other tenants'.
    pub(crate) fn done(&mut self, tenant: &TenantId) {
        self.running.remove(tenant);
        match self.queues.get(tenant) {
            Some(queue) if !queue.is_empty() => self.turns.push_back(tenant.clone()),
            _ => {
                self.queues.remove(tenant);
            }
        }
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued
    }
}

struct Shared<J> {
    queue: Mutex<FairQueue<J>>,
    ready: Condvar,
    stopping: Mutex<bool>,
}

/// A [`FairQueue`] and the threads that run its jobs with `run`; they end
/// when the pool is dropped (jobs still queued are dropped).
pub(crate) struct Pool<J> {
    shared: Arc<Shared<J>>,
    threads: usize,
}

impl<J: Send + 'static> Pool<J> {
    pub(crate) fn start(
        name: &str,
        threads: usize,
        max_queued: usize,
        max_per_tenant: usize,
        run: impl Fn(J) + Send + Sync + 'static,
    ) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(FairQueue::new(max_queued, max_per_tenant)),
            ready: Condvar::new(),
            stopping: Mutex::new(false),
        });
        let run = Arc::new(run);
        let mut started = 0;
        for i in 0..threads.max(1) {
            let (shared, run) = (shared.clone(), run.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || work(&shared, &*run));
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::error!(error = %e, "cannot start a {name} thread"),
            }
        }
        Self {
            shared,
            threads: started,
        }
    }

    /// Queues `job` for `tenant`; gives it back when the queue is full (or
    /// no thread could be started).
    pub(crate) fn push(&self, tenant: &TenantId, job: J) -> Result<(), J> {
        if self.threads == 0 {
            return Err(job);
        }
        let mut queue = lock(&self.shared.queue);
        queue.push(tenant, job)?;
        drop(queue);
        self.shared.ready.notify_one();
        Ok(())
    }
}

impl<J> Drop for Pool<J> {
    fn drop(&mut self) {
        *lock(&self.shared.stopping) = true;
        // Taken so no thread misses the wake-up between its check and its
        // wait.
        let _queue = lock(&self.shared.queue);
        self.shared.ready.notify_all();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One thread: takes the next tenant's job, runs it, and tells the queue.
fn work<J>(shared: &Shared<J>, run: &dyn Fn(J)) {
    loop {
        let mut queue = lock(&shared.queue);
        let (tenant, job) = loop {
            if *lock(&shared.stopping) {
                return;
            }
            if let Some(next) = queue.next() {
                break next;
            }
            queue = shared.ready.wait(queue).unwrap_or_else(|p| p.into_inner());
        };
        drop(queue);
        run(job);
        let mut queue = lock(&shared.queue);
        queue.done(&tenant);
        let more = queue.queued() > 0;
        drop(queue);
        if more {
            shared.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn t(name: &str) -> TenantId {
        TenantId::new(name).unwrap()
    }

    #[test]
    fn tenants_take_turns_and_each_runs_one_job_at_a_time() {
        let mut q = FairQueue::new(100, 100);
        for i in 0..5 {
            q.push(&t("a"), format!("a{i}")).unwrap();
        }
        q.push(&t("b"), "b0".to_owned()).unwrap();
        q.push(&t("c"), "c0".to_owned()).unwrap();
        // Three threads take a job each: one tenant each.
        let (ta, a0) = q.next().unwrap();
        let (tb, b0) = q.next().unwrap();
        let (tc, c0) = q.next().unwrap();
        assert_eq!((a0.as_str(), b0.as_str(), c0.as_str()), ("a0", "b0", "c0"));
        // a's next job waits for a0, however many threads are free.
        assert!(q.next().is_none());
        q.done(&tb);
        q.done(&tc);
        assert!(q.next().is_none(), "b and c have nothing more");
        q.done(&ta);
        assert_eq!(q.next().unwrap().1, "a1");
        // A tenant that comes now goes before a's third job.
        q.push(&t("b"), "b1".to_owned()).unwrap();
        q.done(&ta);
        assert_eq!(q.next().unwrap().1, "b1");
        assert_eq!(q.next().unwrap().1, "a2");
    }

    #[test]
    fn a_full_tenant_queue_refuses_only_that_tenant() {
        // At its share: refused; another tenant still fits.
        let mut q = FairQueue::new(10, 3);
        for i in 0..3 {
            q.push(&t("a"), i).unwrap();
        }
        assert_eq!(q.push(&t("a"), 3), Err(3), "past the tenant's share");
        q.push(&t("b"), 10).unwrap();
        // The whole queue's bound holds across tenants.
        let mut q = FairQueue::new(4, 3);
        for i in 0..3 {
            q.push(&t("a"), i).unwrap();
        }
        q.push(&t("b"), 10).unwrap();
        assert_eq!(q.push(&t("c"), 20), Err(20), "past the whole queue");
        assert_eq!(q.queued(), 4);
        // A job taken frees its place.
        let (a, _) = q.next().unwrap();
        q.push(&t("c"), 20).unwrap();
        q.done(&a);
    }

    #[test]
    fn a_flooding_tenant_does_not_delay_another_on_real_threads() {
        let ran = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = ran.clone();
        let pool = Pool::start("pool-test", 2, 1000, 500, move |job: String| {
            if job.starts_with('a') {
                std::thread::sleep(Duration::from_millis(5));
            }
            lock(&log).push(job);
        });
        for i in 0..500 {
            pool.push(&t("a"), format!("a{i}")).unwrap();
        }
        let submitted = Instant::now();
        pool.push(&t("b"), "b".to_owned()).unwrap();
        while !lock(&ran).iter().any(|j| j == "b") {
            assert!(submitted.elapsed() < Duration::from_secs(5), "b never ran");
            std::thread::sleep(Duration::from_millis(1));
        }
        // b ran on the thread a's flood does not hold, at once: a's jobs run
        // one at a time, so at most one or two of them ran before it.
        let ran = lock(&ran).clone();
        let before_b = ran.iter().position(|j| j == "b").unwrap();
        assert!(before_b <= 2, "{before_b} of a's jobs ran first: {ran:?}");
        assert!(submitted.elapsed() < Duration::from_millis(500));
        drop(pool);
    }
}
