//! What a member would call unread (issue 43, a v1.2 promise): the
//! messages of the main timeline that are not system messages and not
//! deleted, from others they do not block.
//!
//! Most messages count, so the index keeps the exceptions: a row per seq
//! that does not count (`uncounted`: a system message, thread reply or
//! shadow-banned sender's message (v1.3) as it is stored; any message as it is deleted, expires or is erased). A
//! plain message writes nothing more than it did before unread counts
//! (a row per message cost the embedded store's commit thread about a
//! tenth more work and the 1:1 benchmark a millisecond). A member's count
//! is then arithmetic over rows ([`unread`]): the seqs after their read
//! mark, less the uncounted ones, less those the member or someone they
//! block sent (the per-sender index `sent_by`); it never reads messages.

use switchboard_protocol::{Content, Message};

use super::commit::{Commit, Write};
use crate::{ConversationKey, MAX_UNREAD_COUNTED, StoreResult};

/// Rows read for one count at most, from the `uncounted` index and from
/// each sender's rows: four times what a count shows, since the reader's
/// own messages and those of users they block are passed over.
pub const LOOKED_AT: usize = 4 * MAX_UNREAD_COUNTED as usize;

/// Whether `m` counts toward its members' unread counts.
pub fn counts(m: &Message) -> bool {
    m.thread_id.is_none()
        && m.deleted_at.is_none()
        && !m.shadow
        && !matches!(m.content, Some(Content::System(_)) | None)
}

/// The unread count of a member whose read mark is `read` in a
/// conversation whose last seq is `last`, from the rows each store reads:
/// `uncounted`, the seqs in `(read, last]` that do not count, ascending,
/// at most [`LOOKED_AT`]; `passed_over`, the seqs in `(read, last]` sent
/// by the member or by users they block (each sender's at most
/// [`LOOKED_AT`]). At most [`MAX_UNREAD_COUNTED`].
///
/// Every seq up to `last` is a message (appends leave no gap), so what
/// counts is every seq less those two sets. When the `uncounted` read was
/// cut short, the count covers the seqs up to its last row only.
pub fn unread(
    read: u64,
    last: u64,
    uncounted: &[u64],
    passed_over: impl IntoIterator<Item = u64>,
) -> u64 {
    if last <= read {
        return 0;
    }
    let end = match uncounted.last() {
        Some(&seq) if uncounted.len() >= LOOKED_AT => seq.min(last),
        _ => last,
    };
    let skipped = uncounted.iter().filter(|&&s| s > read && s <= end).count() as u64;
    let mut n = (end - read).saturating_sub(skipped);
    for seq in passed_over {
        if seq > read && seq <= end && uncounted.binary_search(&seq).is_err() {
            n = n.saturating_sub(1);
        }
    }
    n.min(MAX_UNREAD_COUNTED)
}

/// `m` was stored: one that does not count gets its row.
pub(super) async fn count<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    m: &Message,
) -> StoreResult<()> {
    if counts(m) {
        return Ok(());
    }
    view.write(Write::Uncounted { c, seq: m.seq }).await
}

/// Message `seq` went (deleted, expired, erased): it counts no more.
pub(super) async fn uncount<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    seq: u64,
) -> StoreResult<()> {
    view.write(Write::Uncounted { c, seq }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seq_after_the_mark_counts_but_the_uncounted_and_the_passed_over() {
        // Seqs 1..=10, read up to 3: 4..=10 is seven.
        assert_eq!(unread(3, 10, &[], []), 7);
        // 5 and 8 do not count; 6 is the reader's, 8 (uncounted too) and 9
        // a blocked user's.
        assert_eq!(unread(3, 10, &[5, 8], [6, 8, 9]), 3);
        // Rows at or before the mark change nothing.
        assert_eq!(unread(3, 10, &[2, 3], [1, 3]), 7);
        assert_eq!(unread(10, 10, &[], []), 0);
        assert_eq!(unread(12, 10, &[], []), 0);
    }

    #[test]
    fn a_count_stops_at_the_most_a_client_shows() {
        assert_eq!(unread(0, 5000, &[], []), MAX_UNREAD_COUNTED);
        assert_eq!(
            unread(0, 1000, &[], []),
            MAX_UNREAD_COUNTED,
            "1000 is past it"
        );
        assert_eq!(unread(1, 1000, &[], []), MAX_UNREAD_COUNTED);
        assert_eq!(unread(2, 1000, &[], []), MAX_UNREAD_COUNTED - 1);
    }

    #[test]
    fn a_cut_read_of_the_index_counts_up_to_its_last_row() {
        // LOOKED_AT uncounted rows at 1..=LOOKED_AT, then plain messages
        // nobody read: the count covers the rows read, so it is zero.
        let rows: Vec<u64> = (1..=LOOKED_AT as u64).collect();
        assert_eq!(unread(0, LOOKED_AT as u64 + 50, &rows, []), 0);
        // One row short of the cut: the 50 after it count.
        assert_eq!(unread(0, LOOKED_AT as u64 + 50, &rows[1..], []), 51);
    }
}
