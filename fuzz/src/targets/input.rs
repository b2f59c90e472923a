//! How targets take several parts from one input, and run the async
//! decoders that never wait.

use std::future::Future;
use std::task::{Context, Poll, Waker};

/// The first line of `data` and the rest: how a target that needs a key
/// or a header beside a value takes both from one input.
pub(super) fn first_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// Inputs of `lines` joined by newlines, as [`first_line`] takes them.
pub(super) fn lines(lines: &[&[u8]]) -> Vec<u8> {
    lines.join(&b'\n')
}

/// Runs a future that never waits (it reads from memory) to its end;
/// `None` if it did wait, which no target's future does.
pub(super) fn at_once<F: Future>(future: F) -> Option<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    match std::pin::pin!(future).poll(&mut cx) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}
