//! The WASI a plugin gets: enough for a language runtime to start and
//! run (JavaScript's StarlingMonkey, CPython), and nothing that reaches
//! outside the call.
//!
//! - **No filesystem** (no preopened directory), **no sockets** (TCP, UDP
//!   and name lookup off), **no environment** (no variables, no
//!   arguments), no stdin; stdout and stderr are discarded.
//! - **Clocks are virtual.** The wall clock reads the moment the call
//!   started, the same all through the call; the monotonic clock stands
//!   still. A plugin cannot measure time (no timing side channels, no busy
//!   waits that end) and the edit policy's `now` stays the clock that
//!   decides.
//! - **Randomness is deterministic**: the same bytes on every call. A
//!   version decides the same input the same way every time, so a shadow's
//!   comparisons and a replay over history say what the code decides, not
//!   what chance did.
//! - `wasi:http` is not provided: its imports stay linked to traps.
//! - **Nothing blocks.** wasmtime-wasi's own `wasi:io` answers blocking
//!   calls by blocking on its Tokio runtime, which panics on a thread that
//!   is already running Tokio tasks, as plugin calls are. So `wasi:io` is
//!   this module's: output is discarded at once, input is closed, and
//!   every pollable is ready (a clock that stands still has nothing to
//!   wait for).
//!
//! The context is built on a call's first WASI call only, so plugins that
//! never call WASI (a Rust plugin whose standard library merely imports
//! it) pay nothing for it.

use std::time::{Duration, SystemTime};

use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasData, Linker, ResourceTable, ResourceType};
use wasmtime_wasi::{
    Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiView,
};

/// The bytes every call's random numbers cycle through.
const RANDOM_BYTES: [u8; 32] = [
    0x6a, 0x09, 0xe6, 0x67, 0xbb, 0x67, 0xae, 0x85, 0x3c, 0x6e, 0xf3, 0x72, 0xa5, 0x4f, 0xf5, 0x3a,
    0x51, 0x0e, 0x52, 0x7f, 0x9b, 0x05, 0x68, 0x8c, 0x1f, 0x83, 0xd9, 0xab, 0x5b, 0xe0, 0xcd, 0x19,
];

/// One call's WASI state, made when the call first uses WASI.
pub(crate) struct CallWasi {
    pub ctx: WasiCtx,
    pub table: ResourceTable,
}

impl CallWasi {
    /// A locked-down context whose wall clock reads `started`.
    pub(crate) fn new(started: SystemTime) -> Self {
        let since_epoch = started
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let ctx = WasiCtxBuilder::new()
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .wall_clock(FrozenWallClock(since_epoch))
            .monotonic_clock(StillMonotonicClock)
            .secure_random(Deterministic::new(RANDOM_BYTES.to_vec()))
            .insecure_random(Deterministic::new(RANDOM_BYTES.to_vec()))
            .insecure_random_seed(0)
            .build();
        Self {
            ctx,
            table: ResourceTable::new(),
        }
    }
}

/// Always the moment the call started.
struct FrozenWallClock(Duration);

impl HostWallClock for FrozenWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        self.0
    }
}

/// Never moves.
struct StillMonotonicClock;

impl HostMonotonicClock for StillMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }

    fn now(&self) -> u64 {
        0
    }
}

/// Links the locked-down WASI: wasmtime-wasi's clocks, random, CLI,
/// filesystem and sockets (which the context above denies), and this
/// module's `wasi:io`.
pub(crate) fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView as _};
    use wasmtime_wasi::p2::bindings::{self, cli, clocks, filesystem, random, sockets};
    use wasmtime_wasi::random::WasiRandom;
    use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView as _};

    let l = linker;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    random::random::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    // No preopened directory: no descriptor, so no file operation.
    filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    bindings::sync::filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    // Sockets are refused when created (the context allows none).
    sockets::tcp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::instance_network::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::network::add_to_linker::<T, WasiSockets>(l, &Default::default(), T::sockets)?;
    sockets::ip_name_lookup::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    bindings::sync::sockets::tcp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    bindings::sync::sockets::udp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    bindings::sync::sockets::udp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    bindings::io::error::add_to_linker::<T, Table>(l, |t| t.ctx().table)?;
    bindings::sync::io::poll::add_to_linker::<T, Io>(l, |t| Unblocking(t.ctx().table))?;
    bindings::sync::io::streams::add_to_linker::<T, Io>(l, |t| Unblocking(t.ctx().table))?;
    Ok(())
}

struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

struct Io;

impl HasData for Io {
    type Data<'a> = Unblocking<'a>;
}

/// `wasi:io` that never blocks (see the module's documentation).
pub(crate) struct Unblocking<'a>(&'a mut ResourceTable);

mod unblocking {
    use wasmtime::component::Resource;
    use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
    use wasmtime_wasi::p2::{
        DynInputStream, DynOutputStream, DynPollable, StreamError, StreamResult,
    };

    use super::Unblocking;

    impl poll::Host for Unblocking<'_> {
        fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
            // Every one is ready.
            Ok((0..pollables.len() as u32).collect())
        }
    }

    impl poll::HostPollable for Unblocking<'_> {
        fn ready(&mut self, _: Resource<DynPollable>) -> wasmtime::Result<bool> {
            Ok(true)
        }

        fn block(&mut self, _: Resource<DynPollable>) -> wasmtime::Result<()> {
            Ok(())
        }

        fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
            poll::HostPollable::drop(&mut *self.0, pollable)
        }
    }

    impl streams::Host for Unblocking<'_> {
        fn convert_stream_error(
            &mut self,
            err: StreamError,
        ) -> wasmtime::Result<streams::StreamError> {
            streams::Host::convert_stream_error(&mut *self.0, err)
        }
    }

    /// Output (stdout, stderr) is discarded: everything fits, at once.
    impl streams::HostOutputStream for Unblocking<'_> {
        fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
            self.0.delete(stream)?;
            Ok(())
        }

        fn check_write(&mut self, _: Resource<DynOutputStream>) -> StreamResult<u64> {
            Ok(64 * 1024)
        }

        fn write(&mut self, _: Resource<DynOutputStream>, _: Vec<u8>) -> StreamResult<()> {
            Ok(())
        }

        fn blocking_write_and_flush(
            &mut self,
            _: Resource<DynOutputStream>,
            _: Vec<u8>,
        ) -> StreamResult<()> {
            Ok(())
        }

        fn blocking_write_zeroes_and_flush(
            &mut self,
            _: Resource<DynOutputStream>,
            _: u64,
        ) -> StreamResult<()> {
            Ok(())
        }

        fn subscribe(
            &mut self,
            stream: Resource<DynOutputStream>,
        ) -> wasmtime::Result<Resource<DynPollable>> {
            wasmtime_wasi::p2::subscribe(self.0, stream)
        }

        fn write_zeroes(&mut self, _: Resource<DynOutputStream>, _: u64) -> StreamResult<()> {
            Ok(())
        }

        fn flush(&mut self, _: Resource<DynOutputStream>) -> StreamResult<()> {
            Ok(())
        }

        fn blocking_flush(&mut self, _: Resource<DynOutputStream>) -> StreamResult<()> {
            Ok(())
        }

        fn splice(
            &mut self,
            _: Resource<DynOutputStream>,
            _: Resource<DynInputStream>,
            _: u64,
        ) -> StreamResult<u64> {
            Err(StreamError::Closed)
        }

        fn blocking_splice(
            &mut self,
            _: Resource<DynOutputStream>,
            _: Resource<DynInputStream>,
            _: u64,
        ) -> StreamResult<u64> {
            Err(StreamError::Closed)
        }
    }

    /// Input (stdin) is closed.
    impl streams::HostInputStream for Unblocking<'_> {
        fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
            self.0.delete(stream)?;
            Ok(())
        }

        fn read(&mut self, _: Resource<DynInputStream>, _: u64) -> StreamResult<Vec<u8>> {
            Err(StreamError::Closed)
        }

        fn blocking_read(&mut self, _: Resource<DynInputStream>, _: u64) -> StreamResult<Vec<u8>> {
            Err(StreamError::Closed)
        }

        fn skip(&mut self, _: Resource<DynInputStream>, _: u64) -> StreamResult<u64> {
            Err(StreamError::Closed)
        }

        fn blocking_skip(&mut self, _: Resource<DynInputStream>, _: u64) -> StreamResult<u64> {
            Err(StreamError::Closed)
        }

        fn subscribe(
            &mut self,
            stream: Resource<DynInputStream>,
        ) -> wasmtime::Result<Resource<DynPollable>> {
            wasmtime_wasi::p2::subscribe(self.0, stream)
        }
    }
}

/// Links every function of every interface `component` imports that is
/// neither the host's nor the WASI above to one that fails the call, and
/// its resources to empty host resources, so the component loads and
/// traps only if it calls one. (wasmtime's own stubbing would also stub
/// WASI interfaces newer than the host's, which the linker otherwise
/// matches by semver, and their resources would then differ.)
pub(crate) fn link_the_rest_to_traps<T: 'static>(
    linker: &mut Linker<T>,
    component: &Component,
    engine: &Engine,
) -> wasmtime::Result<()> {
    let ty = component.component_type();
    for (name, import) in ty.imports(engine) {
        if linked(name) != "trap" {
            continue;
        }
        match import.ty {
            ComponentItem::ComponentInstance(instance) => {
                let mut linked_instance = linker.instance(name)?;
                for (item, export) in instance.exports(engine) {
                    match export.ty {
                        ComponentItem::ComponentFunc(_) => {
                            let what = format!("{name}#{item}");
                            linked_instance.func_new(item, move |_, _, _, _| {
                                wasmtime::bail!("`{what}` is not available to plugins")
                            })?;
                        }
                        ComponentItem::Resource(_) => {
                            linked_instance.resource(item, wasi_resource(item), |_, _| Ok(()))?;
                        }
                        _ => {}
                    }
                }
            }
            ComponentItem::ComponentFunc(_) => {
                let what = name.to_owned();
                linker.root().func_new(name, move |_, _, _, _| {
                    wasmtime::bail!("`{what}` is not available to plugins")
                })?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The host type of a resource a trapped interface names: those it takes
/// from `wasi:io` (as `wasi:http/types` does) must be WASI's own, for the
/// component's two imports to agree; any other is a new, empty one.
fn wasi_resource(name: &str) -> ResourceType {
    use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, IoError};
    match name {
        "input-stream" => ResourceType::host::<DynInputStream>(),
        "output-stream" => ResourceType::host::<DynOutputStream>(),
        "pollable" => ResourceType::host::<DynPollable>(),
        "io-error" | "error" => ResourceType::host::<IoError>(),
        _ => ResourceType::host::<()>(),
    }
}

/// How the host links an interface a component imports: `provided` (the
/// host's own), `wasi` (the locked-down WASI above), or `trap` (anything
/// else: calling it fails the call).
pub fn linked(import: &str) -> &'static str {
    if import.starts_with("switchboard:plugin/") {
        "provided"
    } else if import.starts_with("wasi:") && !import.starts_with("wasi:http/") {
        "wasi"
    } else {
        "trap"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_import_is_linked_as_documented() {
        assert_eq!(linked("switchboard:plugin/host@0.1.0"), "provided");
        assert_eq!(linked("wasi:clocks/wall-clock@0.2.12"), "wasi");
        assert_eq!(linked("wasi:filesystem/types@0.2.6"), "wasi");
        assert_eq!(linked("wasi:http/types@0.2.10"), "trap");
        assert_eq!(linked("acme:anything/else"), "trap");
    }

    /// (What a runtime sees through them: `tests/it/plugin_host.rs`.)
    #[test]
    fn the_clocks_are_virtual() {
        let wall = FrozenWallClock(Duration::from_secs(1_000));
        assert_eq!(wall.now(), Duration::from_secs(1_000));
        assert_eq!(wall.now(), wall.now());
        assert_eq!(StillMonotonicClock.now(), 0);
    }
}
