//! The wasmtime engine every plugin shares: its configuration, the epoch
//! ticker that gives calls a wall-clock deadline, and the permits that
//! make calls beyond the instance pool wait instead of fail.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::limits::PluginLimits;

/// How often the epoch advances: the granularity of every deadline.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Core instances, memories and tables one component may hold: a Rust
/// component for wasm32-wasip2 has a handful of each (its module, the
/// canonical-ABI shims); these leave room without letting one component
/// take the pool.
const CORE_INSTANCES_PER_COMPONENT: u32 = 16;
const MEMORIES_PER_COMPONENT: u32 = 2;
const TABLES_PER_COMPONENT: u32 = 4;

/// Memory and table bytes of a finished instance kept mapped and reset in
/// place for the next call.
const KEEP_RESIDENT_BYTES: usize = 256 << 10;

pub(crate) fn engine(limits: &PluginLimits) -> wasmtime::Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    let size = limits.pool_size.max(1);
    pool.total_component_instances(size)
        .total_core_instances(size * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(size * MEMORIES_PER_COMPONENT)
        .total_tables(size * TABLES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_memory_size(limits.memory_bytes)
        .table_elements(limits.table_elements)
        // Reset a finished instance's memory and tables by rewriting the
        // pages it touched rather than unmapping them: a hook touches a few
        // pages, and returning them to the kernel on every call (madvise,
        // then page faults on the next) costs more than the call itself.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES)
        // Where the kernel can say which pages were touched (Linux 6.7+),
        // only those are reset.
        .pagemap_scan(Enabled::Auto);
    let mut config = Config::new();
    config
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        // A fresh instance per call is cheap when its memory is a
        // copy-on-write image of the module's initial data.
        .memory_init_cow(true)
        .epoch_interruption(true)
        .consume_fuel(true)
        .max_wasm_stack(limits.stack_bytes)
        // Reserve only the memory cap per slot (the default reserves 4 GiB
        // plus guards, hundreds of GiB of address space for the pool); the
        // price is an explicit bounds check on memory accesses.
        .memory_reservation(limits.memory_bytes as u64)
        .memory_guard_size(64 << 10)
        // Hooks are synchronous: the concurrency machinery of the async
        // component model only slows every call down.
        .concurrency_support(false)
        .wasm_component_model(true);
    Engine::new(&config)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] while a call runs,
/// until dropped. Between calls its thread sleeps until the next one
/// starts: a thread waking every millisecond for nothing cost an idle
/// process a thousand wakeups a second. A call's deadline counts from the
/// epoch when it starts, so a pause between calls moves no deadline.
pub(crate) struct Ticker {
    shared: Arc<TickerShared>,
    thread: Option<JoinHandle<()>>,
}

struct TickerShared {
    stop: AtomicBool,
    /// Calls running now.
    running: AtomicUsize,
}

/// A call that the ticker keeps ticking for, while held.
pub(crate) struct Ticking<'a>(&'a Ticker);

impl Ticker {
    pub(crate) fn start(engine: Engine) -> std::io::Result<Self> {
        let shared = Arc::new(TickerShared {
            stop: AtomicBool::new(false),
            running: AtomicUsize::new(0),
        });
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("plugin-epoch".into())
            .spawn(move || {
                while !state.stop.load(Ordering::Acquire) {
                    if state.running.load(Ordering::Acquire) == 0 {
                        // `Ticker::call` unparks it; a token left by an
                        // unpark before this park makes it return at once.
                        std::thread::park();
                        continue;
                    }
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Marks a call as running, waking the ticker if it slept.
    pub(crate) fn call(&self) -> Ticking<'_> {
        if self.shared.running.fetch_add(1, Ordering::AcqRel) == 0
            && let Some(t) = &self.thread
        {
            t.thread().unpark();
        }
        Ticking(self)
    }
}

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        self.0.shared.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A counting semaphore for synchronous callers. Permits are held only for
/// the length of one call, which the deadline bounds, so a wait is short.
pub(crate) struct Permits {
    free: Mutex<u32>,
    freed: Condvar,
}

pub(crate) struct Permit<'a>(&'a Permits);

impl Permits {
    pub(crate) fn new(n: u32) -> Self {
        Self {
            free: Mutex::new(n.max(1)),
            freed: Condvar::new(),
        }
    }

    pub(crate) fn acquire(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(|p| p.into_inner());
        *free += 1;
        self.0.freed.notify_one();
    }
}
