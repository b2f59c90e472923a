//! One chat message, one trace: the W3C trace context of a message's
//! spans, carried across NATS from the gateway that took it to the
//! writer that stored it, and back to the gateways that deliver it.
//!
//! Where it travels (each absent unless tracing is on):
//! - a command alone on the ingest stream: the `traceparent` header (the
//!   W3C name, which nats-server's own message tracing also reads);
//! - a message of several sends (`Sb-Commands`): `Sb-Traceparents`, one
//!   entry per command line, in order, empty for a line without one;
//! - an event published on its own (a conversation's subject): the
//!   `traceparent` header;
//! - an event in a delivery to a gateway: the `traceparent` field of its
//!   addressing line (`envelope::push_delivery`).
//!
//! Processes that do not know these keys ignore them, so tracing can be
//! turned on one process at a time.
//!
//! The spans of the message path have the target [`TARGET`]; the binary
//! exports those (and warnings from anywhere inside them), not every span
//! of the process. Tracing is off until the binary calls [`enable`], and
//! then nothing here costs more than a flag check.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The header of a command or event alone.
pub const HEADER_TRACEPARENT: &str = "traceparent";

/// The header of a message of several commands: their trace contexts,
/// comma-separated in line order (a traceparent never holds a comma).
pub const HEADER_TRACEPARENTS: &str = "Sb-Traceparents";

/// The tracing target of the message path's spans.
pub const TARGET: &str = "switchboard::message";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns trace propagation on for this process (once its exporter is
/// installed).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether this process traces messages.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The `traceparent` of `span`, to hand to the next process; `None` when
/// tracing is off or the span is not traced.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if !enabled() {
        return None;
    }
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = One(None);
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.0
}

/// Makes `span` (new, not yet entered) a child of the span `traceparent`
/// names. A value that does not parse leaves it a root: a trace context
/// is a hint, never a reason to refuse a message.
pub fn follow(span: &tracing::Span, traceparent: &str) {
    if !enabled() {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&One(Some(traceparent.to_owned())));
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The `Sb-Traceparents` value of a message of several commands; `None`
/// when none of them has one.
pub fn join<'a>(traceparents: impl IntoIterator<Item = Option<&'a str>>) -> Option<String> {
    let mut any = false;
    let mut joined = String::new();
    for (i, traceparent) in traceparents.into_iter().enumerate() {
        if i > 0 {
            joined.push(',');
        }
        if let Some(t) = traceparent {
            any = true;
            joined.push_str(t);
        }
    }
    any.then_some(joined)
}

/// The `i`-th entry of an `Sb-Traceparents` value.
pub fn nth(joined: &str, i: usize) -> Option<&str> {
    joined.split(',').nth(i).filter(|t| !t.is_empty())
}

/// A carrier of the one value the W3C propagator reads and writes
/// (`tracestate` is not carried).
struct One(Option<String>);

impl Injector for One {
    fn set(&mut self, key: &str, value: String) {
        if key == HEADER_TRACEPARENT {
            self.0 = Some(value);
        }
    }
}

impl Extractor for One {
    fn get(&self, key: &str) -> Option<&str> {
        (key == HEADER_TRACEPARENT)
            .then_some(self.0.as_deref())
            .flatten()
    }

    fn keys(&self) -> Vec<&str> {
        vec![HEADER_TRACEPARENT]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_header_keeps_each_line_in_its_place() {
        let a = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let b = "00-0af7651916cd43dd8448eb211c80319d-b7ad6b7169203332-01";
        let joined = join([Some(a), None, Some(b)]).unwrap();
        assert_eq!(nth(&joined, 0), Some(a));
        assert_eq!(nth(&joined, 1), None);
        assert_eq!(nth(&joined, 2), Some(b));
        assert_eq!(nth(&joined, 3), None);
        assert_eq!(join([None, None]), None);
    }
}
