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
/// edit's new text, a deletion. A send answered as a retry is put again:
/// after a crash between a commit and its feed, its first put was lost
/// (a put is idempotent).
pub(crate) fn ops_of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Vec<IndexOp> {
    let mut ops = Vec::new();
    for outcome in outcomes {
        match outcome {
            Outcome::Deliver {
                tenant, message, ..
            }
            | Outcome::Answer { tenant, message } => ops.extend(IndexOp::put_of(tenant, message)),
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

/// The most bytes of changes in one feed message: well under the
/// stream's `max_msg_size` (4 MiB), so a large batch goes in several.
const MAX_FEED_MESSAGE: usize = 1 << 20;

/// Stores `ops` on the feed of `partition`, in order, in messages of at
/// most [`MAX_FEED_MESSAGE`] bytes. A failure is counted and logged; the
/// callers that must not go on without it (the erasure) get it back, the
/// message path goes on (the change reaches the index at its next
/// rebuild).
pub(crate) async fn feed(ctx: &Ctx, partition: u16, ops: &[IndexOp]) -> Result<(), String> {
    if ops.is_empty() || !ctx.config.search_feed {
        return Ok(());
    }
    let mut bodies = vec![String::new()];
    for op in ops {
        match serde_json::to_string(op) {
            Ok(line) => {
                if let Some(body) = bodies.last_mut()
                    && !body.is_empty()
                    && body.len() + line.len() + 1 > MAX_FEED_MESSAGE
                {
                    bodies.push(String::new());
                }
                if let Some(body) = bodies.last_mut() {
                    let _ = writeln!(body, "{line}");
                }
            }
            Err(e) => tracing::warn!(error = %e, "an index change does not encode"),
        }
    }
    for body in bodies {
        // One at a time: the feed's order is the index's.
        let stored = match ctx.js.publish(index_subject(partition), body.into()).await {
            Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = stored {
            crate::metrics::index_ops_lost(ops.len());
            tracing::warn!(error = %e, ops = ops.len(), "index changes were not stored; the index gets them at its next rebuild");
            return Err(e);
        }
    }
    Ok(())
}
