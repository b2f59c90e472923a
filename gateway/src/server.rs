//! Accepting connections: the caps and timeouts that keep strangers from
//! holding a gateway's sockets.
//!
//! Every TCP connection takes a place, per gateway and per client address
//! (an IPv6 client by its prefix, `ClientKey`), before a byte of it is
//! read; one over either cap is answered at once (503 `unavailable` or 429
//! `rate_limited`) and closed, so nothing is upgraded. The place is held as
//! long as the socket lives, also after a WebSocket upgrade. HTTP/1 is
//! served by hyper with:
//! - a header timeout (the whole request head, from the connection's
//!   start or the request's first byte),
//! - an idle timeout (no request in flight and no byte either way),
//! - a write timeout (response bytes the socket has not taken for that
//!   long: the client does not read, say it pipelines requests and never
//!   reads the answers); the connection is then reset, unsent bytes
//!   dropped, since a graceful close would wait for them,
//! - buffers of `http_buffer_bytes` each way, which bound what one
//!   connection holds of requests read ahead and answers not yet sent,
//! - and, through the router, a body timeout (the longest pause between
//!   two chunks of a request body; `http/mod.rs`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use switchboard_protocol::ErrorCode;
use switchboard_protocol::error::ErrorBody;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::config::Limits;

/// The caps and timeouts of one listener (from `[limits]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServeLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub write_timeout: Duration,
    pub buffer_bytes: usize,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub ipv6_prefix_len: u8,
}

/// hyper's smallest buffer (it refuses anything less).
const MIN_BUFFER_BYTES: usize = 8192;

impl ServeLimits {
    pub(crate) fn of(limits: &Limits) -> Self {
        Self {
            header_timeout: Duration::from_millis(limits.http_header_timeout_ms.max(1)),
            idle_timeout: Duration::from_millis(limits.http_idle_timeout_ms.max(1)),
            write_timeout: Duration::from_millis(limits.http_write_timeout_ms.max(1)),
            buffer_bytes: limits.http_buffer_bytes.max(MIN_BUFFER_BYTES),
            max_connections: limits.max_connections,
            max_connections_per_ip: limits.max_connections_per_ip,
            ipv6_prefix_len: limits.ipv6_prefix_len.min(128),
        }
    }
}

/// What the per-address cap counts by: an IPv4 address (also one mapped
/// into IPv6, as a dual-stack socket reports IPv4 clients), or the first
/// `prefix_len` bits of an IPv6 address, since one IPv6 host is commonly
/// given a whole /64 and may use any address of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey(IpAddr);

impl ClientKey {
    pub(crate) fn of(ip: IpAddr, prefix_len: u8) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Self(IpAddr::V4(v4)),
            IpAddr::V6(v6) => {
                let bits = u32::from(prefix_len.min(128));
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                Self(IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask)))
            }
        }
    }
}

/// The connection places of one listener.
struct Places {
    max_total: usize,
    max_per_ip: usize,
    ipv6_prefix_len: u8,
    taken: Mutex<Taken>,
}

#[derive(Default)]
struct Taken {
    total: usize,
    per_ip: HashMap<ClientKey, usize>,
}

/// One connection's place; dropping it (with the socket) gives it back.
struct Place {
    places: Arc<Places>,
    key: ClientKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    GatewayFull,
    AddressFull,
}

impl Places {
    /// The counts; every change is a whole increment or decrement, so a
    /// poisoned lock holds consistent numbers.
    fn lock(&self) -> MutexGuard<'_, Taken> {
        self.taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn take(self: &Arc<Self>, ip: IpAddr) -> Result<Place, Refusal> {
        let key = ClientKey::of(ip, self.ipv6_prefix_len);
        let mut taken = self.lock();
        if taken.total >= self.max_total {
            return Err(Refusal::GatewayFull);
        }
        let of_ip = taken.per_ip.entry(key).or_default();
        if *of_ip >= self.max_per_ip {
            return Err(Refusal::AddressFull);
        }
        *of_ip += 1;
        taken.total += 1;
        Ok(Place {
            places: self.clone(),
            key,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut taken = self.places.lock();
        taken.total = taken.total.saturating_sub(1);
        if let Some(n) = taken.per_ip.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                taken.per_ip.remove(&self.key);
            }
        }
    }
}

/// When a connection last moved a byte and how many requests it has in
/// flight (idle is neither, for the idle timeout), and since when the
/// socket has refused its response bytes (for the write timeout).
struct Activity {
    epoch: tokio::time::Instant,
    last_io_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// 0 while writes go through; else 1 + the millisecond (from `epoch`)
    /// of the first write the socket refused since one last went through.
    stalled_at: AtomicU64,
    /// Wakes the connection's timers when a stall begins.
    stall_began: tokio::sync::Notify,
    /// Set when the write timeout gives up on the connection: its socket
    /// is then reset (`SO_LINGER` 0), so the kernel drops the unsent
    /// bytes at once instead of keeping them for a peer that never reads.
    reset: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Self {
            epoch: tokio::time::Instant::now(),
            last_io_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            stalled_at: AtomicU64::new(0),
            stall_began: tokio::sync::Notify::new(),
            reset: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn touch(&self) {
        self.last_io_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn last_io(&self) -> tokio::time::Instant {
        self.epoch + Duration::from_millis(self.last_io_ms.load(Ordering::Relaxed))
    }

    /// The socket took bytes: whatever stall there was is over.
    fn wrote(&self) {
        self.touch();
        self.stalled_at.store(0, Ordering::Relaxed);
    }

    /// The socket took no bytes: a stall begins, unless one runs already.
    fn write_refused(&self) {
        let at = self.now_ms().saturating_add(1);
        if self
            .stalled_at
            .compare_exchange(0, at, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.stall_began.notify_one();
        }
    }

    /// When the running stall began, if one runs.
    fn stalled_since(&self) -> Option<tokio::time::Instant> {
        match self.stalled_at.load(Ordering::Relaxed) {
            0 => None,
            at => Some(self.epoch + Duration::from_millis(at - 1)),
        }
    }
}

/// A request in flight; counted until its response is produced.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The socket, noting every byte it moves and every write it refuses, and
/// holding the connection's place for as long as it lives.
struct Tracked {
    stream: TcpStream,
    activity: Arc<Activity>,
    _place: Place,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if self.activity.reset.load(Ordering::Relaxed)
            && let Err(e) = self.stream.set_zero_linger()
        {
            tracing::debug!(error = %e, "could not set SO_LINGER 0 on a stalled connection");
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        match polled {
            Poll::Ready(Ok(n)) if n > 0 => self.activity.wrote(),
            Poll::Pending => self.activity.write_refused(),
            _ => {}
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets the
/// open HTTP connections finish their requests (upgraded WebSockets go on:
/// they drain on their own).
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ServeLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let places = Arc::new(Places {
        max_total: limits.max_connections,
        max_per_ip: limits.max_connections_per_ip,
        ipv6_prefix_len: limits.ipv6_prefix_len,
        taken: Mutex::new(Taken::default()),
    });
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, mostly: wait rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = connections.join_next() => continue,
        };
        // Frames are small and latency matters: no Nagle delay (which meets
        // the peer's delayed ACKs and holds small writes for up to 40 ms).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        match places.take(peer.ip()) {
            Ok(place) => {
                let conn = connection(
                    stream,
                    place,
                    peer,
                    router.clone(),
                    limits,
                    stopping.clone(),
                );
                connections.spawn(conn);
            }
            Err(refusal) => {
                tracing::debug!(%peer, ?refusal, "connection refused: over a connection cap");
                connections.spawn(refuse(stream, refusal));
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serves one accepted connection.
async fn connection(
    stream: TcpStream,
    place: Place,
    peer: SocketAddr,
    router: axum::Router,
    limits: ServeLimits,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        stream,
        activity: activity.clone(),
        _place: place,
    });
    let requests = activity.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        let in_flight = InFlight::start(&requests);
        request.extensions_mut().insert(ConnectInfo(peer));
        let request = request.map(axum::body::Body::new);
        let served = router.clone().oneshot(request);
        async move {
            let response = served.await;
            drop(in_flight);
            response
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.buffer_bytes)
        .keep_alive(true);
    let served = http.serve_connection(io, service).with_upgrades();
    tokio::pin!(served);
    let mut closing = false;
    loop {
        let idle_at = activity.last_io() + limits.idle_timeout;
        let stall_ends = activity.stalled_since().map(|at| at + limits.write_timeout);
        tokio::select! {
            result = served.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "HTTP connection ended");
                }
                return;
            }
            // Also while closing: a graceful close waits for the unsent
            // bytes, which a client that does not read never takes.
            () = tokio::time::sleep_until(stall_ends.unwrap_or(idle_at)), if stall_ends.is_some() => {
                let expired = activity
                    .stalled_since()
                    .is_some_and(|at| at + limits.write_timeout <= tokio::time::Instant::now());
                if expired {
                    tracing::info!(%peer, timeout_ms = limits.write_timeout.as_millis() as u64, "HTTP response made no write progress: connection reset");
                    activity.reset.store(true, Ordering::Relaxed);
                    return;
                }
            }
            () = activity.stall_began.notified() => {}
            () = tokio::time::sleep_until(idle_at), if !closing => {
                let idle = activity.in_flight.load(Ordering::Relaxed) == 0
                    && activity.last_io() + limits.idle_timeout <= tokio::time::Instant::now();
                if idle {
                    tracing::debug!(%peer, "idle HTTP connection closed");
                    served.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
            Ok(()) = stopping.changed(), if !closing => {
                served.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// Answers a connection over a cap and closes it, without reading its
/// request: the cap holds however many such connections arrive.
async fn refuse(mut stream: TcpStream, refusal: Refusal) {
    let (status, code, message) = match refusal {
        Refusal::GatewayFull => (
            "503 Service Unavailable",
            ErrorCode::Unavailable,
            "this gateway is at its connection limit; retry shortly or connect to another",
        ),
        Refusal::AddressFull => (
            "429 Too Many Requests",
            ErrorCode::RateLimited,
            "too many connections from this address; close some and retry",
        ),
    };
    let body = serde_json::to_string(&ErrorBody {
        code,
        message: message.to_owned(),
        retry_after_ms: None,
    })
    .unwrap_or_default();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client sent, briefly: closing with unread bytes
        // would reset the connection before the client sees the answer.
        let mut sink = [0u8; 4096];
        while tokio::io::AsyncReadExt::read(&mut stream, &mut sink).await? > 0 {}
        std::io::Result::Ok(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), answer).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(total: usize, per_ip: usize) -> Arc<Places> {
        Arc::new(Places {
            max_total: total,
            max_per_ip: per_ip,
            ipv6_prefix_len: 64,
            taken: Mutex::new(Taken::default()),
        })
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn key(text: &str, prefix_len: u8) -> ClientKey {
        ClientKey::of(ip(text), prefix_len)
    }

    #[test]
    fn places_are_capped_per_address_and_in_all() {
        let p = places(3, 2);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let a1 = p.take(a).expect("first of a");
        let _a2 = p.take(a).expect("second of a: at the per-address cap");
        assert_eq!(p.take(a).err(), Some(Refusal::AddressFull));
        let _b1 = p.take(b).expect("b: at the gateway cap");
        assert_eq!(p.take(b).err(), Some(Refusal::GatewayFull));
        drop(a1);
        let _a3 = p.take(a).expect("a place given back is free again");
        assert_eq!(p.lock().total, 3);
    }

    #[test]
    fn given_back_places_leave_no_entry() {
        let p = places(10, 10);
        let a: IpAddr = [10, 0, 0, 1].into();
        drop(p.take(a).expect("free"));
        assert!(p.lock().per_ip.is_empty());
        assert_eq!(p.lock().total, 0);
    }

    #[test]
    fn ipv6_clients_count_by_their_prefix() {
        // The same /64: one client.
        assert_eq!(
            key("2001:db8:1:2:aaaa::1", 64),
            key("2001:db8:1:2:ffff:eeee:dddd:cccc", 64)
        );
        // The next /64: another.
        assert_ne!(key("2001:db8:1:2::1", 64), key("2001:db8:1:3::1", 64));
        // At the prefix's last bit and just past it.
        assert_eq!(key("2001:db8::1", 127), key("2001:db8::", 127));
        assert_ne!(key("2001:db8::2", 127), key("2001:db8::", 127));
        // /128 is the whole address, /0 every IPv6 client at once.
        assert_ne!(key("2001:db8::1", 128), key("2001:db8::2", 128));
        assert_eq!(key("2001:db8::1", 0), key("fe80::1", 0));
        assert_eq!(key("2001:db8:1:2::1", 48), key("2001:db8:1:ff::1", 48));
    }

    #[test]
    fn ipv4_counts_by_address_also_when_mapped_into_ipv6() {
        assert_ne!(key("10.0.0.1", 0), key("10.0.0.2", 0), "no prefix for IPv4");
        assert_eq!(key("::ffff:10.0.0.1", 64), key("10.0.0.1", 64));
        assert_ne!(key("::ffff:10.0.0.1", 64), key("::ffff:10.0.0.2", 64));
    }

    #[test]
    fn a_prefix_is_capped_as_one_address() {
        let p = places(100, 2);
        let _a = p.take(ip("2001:db8::1")).expect("first of the /64");
        let _b = p.take(ip("2001:db8::2")).expect("second: at the cap");
        assert_eq!(
            p.take(ip("2001:db8::ffff:3")).err(),
            Some(Refusal::AddressFull),
            "a third address of the same /64 is past the cap"
        );
        let _c = p.take(ip("2001:db8:0:1::1")).expect("another /64 is free");
    }
}
