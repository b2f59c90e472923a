//! The search index feed (v1.2): what a commit changed of searchable
//! text, one message on `sb.index.<partition>` per batch (a line per
//! change), stored before the commands are acked. The expiry and the
//! erasure, which commit outside batches, feed it the same way
//! ([`feed`]).

use std::fmt::Write as _;

use switchboard_nats::search::{IndexOp, index_subject};

use crate::ctx::Ctx;
use crate::sequencer::Outcome;

/// The index changes of a batch's outcomes: a sent message's text, an
/// edit's new text, a deletion.
pub(crate) fn ops_of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Vec<IndexOp> {
    let mut ops = Vec::new();
    for outcome in outcomes {
        match outcome {
            Outcome::Deliver {
                tenant, message, ..
            } => ops.extend(IndexOp::put_of(tenant, message)),
            Outcome::Update {
                tenant, message, ..
            } => ops.push(
                IndexOp::put_of(tenant, message).unwrap_or_else(|| IndexOp::Remove {
                    tenant: tenant.clone(),
                    conversation_id: message.conversation_id.clone(),
                    seqs: vec![message.seq],
                }),
            ),
            _ => {}
        }
    }
    ops
}

/// Stores `ops` on the feed of `partition`. Best effort: a change the
/// feed does not get reaches the index at its next rebuild (logged and
/// counted).
pub(crate) async fn feed(ctx: &Ctx, partition: u16, ops: &[IndexOp]) {
    if ops.is_empty() {
        return;
    }
    let mut body = String::new();
    for op in ops {
        match serde_json::to_string(op) {
            Ok(line) => {
                let _ = writeln!(body, "{line}");
            }
            Err(e) => tracing::warn!(error = %e, "an index change does not encode"),
        }
    }
    let stored = match ctx.js.publish(index_subject(partition), body.into()).await {
        Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = stored {
        crate::metrics::index_ops_lost(ops.len());
        tracing::warn!(error = %e, ops = ops.len(), "index changes were not stored; the index gets them at its next rebuild");
    }
}
