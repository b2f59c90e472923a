//! A plain HTTP/1.1 server on loopback for the answer-reading tests: it
//! answers every request with one status and body, or with a body that
//! never ends. Built for tests only (this crate's, and others' through
//! the `test-server` feature), so a failure to bind panics the test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads a request's head and body (by its Content-Length), enough for
/// the client to wait for the answer.
async fn read_request(s: &mut TcpStream) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let Ok(n) = s.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return;
            }
        }
    }
}

/// The URL of a server answering `status` with `body`.
pub async fn answer_with(status: u16, body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                read_request(&mut s).await;
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&body).await;
            });
        }
    });
    url
}

/// The URL of a server answering `status` with a chunked body that never
/// ends, and how many bytes of it went out.
pub async fn endless(status: u16) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let written = Arc::new(AtomicU64::new(0));
    let counter = written.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                read_request(&mut s).await;
                let head = format!("HTTP/1.1 {status} X\r\ntransfer-encoding: chunked\r\n\r\n");
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
                while s.write_all(chunk.as_bytes()).await.is_ok() {
                    counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                }
            });
        }
    });
    (url, written)
}
