//! Reads of the v1.1 rows in fjall: a user's reactions, the pins, a
//! thread's messages, a user's threads, unread mentions.

use fjall::Readable;
use switchboard_protocol::{ConversationId, Message, TenantId, UserId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, read_words, str_after, trailing_u64};
use super::lookup::{check_membership, scan};
use crate::{ConversationKey, MAX_UNREAD_COUNTED, PinRow, StoreResult, ThreadEntry};

pub(super) fn user_reactions<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
    user: &UserId,
    seqs: &[u64],
) -> StoreResult<Vec<Vec<String>>> {
    let (t, c, u) = (
        key.tenant.as_str(),
        key.conversation_id.as_str(),
        user.as_str(),
    );
    seqs.iter()
        .map(|seq| {
            let prefix = Key::new().s(t).s(c).n(*seq).s(u).bytes();
            scan(r, &s.reactions, prefix.clone())
                .map(|kv| kv.and_then(|(k, _)| str_after(&k, &prefix).map(str::to_owned)))
                .collect()
        })
        .collect()
}

pub(super) fn pins<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
) -> StoreResult<Vec<PinRow>> {
    let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
    let mut pins = scan(r, &s.pins, Key::new().s(t).s(c).bytes())
        .map(|kv| kv.and_then(|(_, v)| decode::<PinRow>(&v)))
        .collect::<StoreResult<Vec<_>>>()?;
    pins.sort_by(|a, b| b.at.cmp(&a.at).then(b.message_id.cmp(&a.message_id)));
    Ok(pins)
}

fn message_at<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    seq: u64,
) -> StoreResult<Option<Message>> {
    r.get(&s.messages, Key::new().s(t).s(c).n(seq).bytes())
        .map_err(storage)?
        .map(|v| decode(&v))
        .transpose()
}

/// The thread of `root` (the root and its replies) with
/// `low <= seq < high`, newest first, at most `limit`.
#[allow(clippy::too_many_arguments)]
pub(super) fn thread_history<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    root: u64,
    low: u64,
    high: u64,
    limit: usize,
) -> StoreResult<Vec<Message>> {
    let range =
        Key::new().s(t).s(c).n(root).n(low).bytes()..Key::new().s(t).s(c).n(root).n(high).bytes();
    let mut out = Vec::new();
    for g in r.range(&s.thread_replies, range).rev() {
        let (k, _) = g.into_inner().map_err(storage)?;
        if let Some(m) = message_at(r, s, t, c, trailing_u64(&k)?)? {
            out.push(m);
        }
        if out.len() == limit {
            return Ok(out);
        }
    }
    if (low..high).contains(&root)
        && let Some(m) = message_at(r, s, t, c, root)?
    {
        out.push(m);
    }
    Ok(out)
}

/// Keys under `prefix` whose trailing seq is above `after`, counted up to
/// [`MAX_UNREAD_COUNTED`].
fn count_after<R: Readable>(
    r: &R,
    space: &fjall::Keyspace,
    prefix: Vec<u8>,
    after: u64,
) -> StoreResult<u64> {
    let mut low = prefix.clone();
    low.extend_from_slice(&after.saturating_add(1).to_be_bytes());
    let mut high = prefix;
    high.extend_from_slice(&u64::MAX.to_be_bytes());
    let mut n = 0;
    for g in r.range(space, low..=high).take(MAX_UNREAD_COUNTED as usize) {
        g.key().map_err(storage)?;
        n += 1;
    }
    Ok(n)
}

pub(super) fn threads<R: Readable>(
    r: &R,
    s: &Spaces,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
) -> StoreResult<Vec<ThreadEntry>> {
    let (t, c, u) = (tenant.as_str(), conversation.as_str(), reader.as_str());
    check_membership(r, s, t, c, u)?;
    let mut out = Vec::new();
    for kv in scan(r, &s.thread_marks, Key::new().s(t).s(u).s(c).bytes()) {
        let (k, v) = kv?;
        let root_seq = trailing_u64(&k)?;
        let [mark] = read_words::<1>(&v)?;
        // A root moved to the archive is not listed (see README).
        let Some(root) = message_at(r, s, t, c, root_seq)? else {
            continue;
        };
        let unread = count_after(
            r,
            &s.thread_replies,
            Key::new().s(t).s(c).n(root_seq).bytes(),
            mark,
        )?;
        out.push(ThreadEntry { root, unread });
    }
    out.sort_by(|a, b| {
        let last = |e: &ThreadEntry| e.root.thread.as_ref().map(|th| th.last_reply_at);
        last(b).cmp(&last(a)).then(b.root.seq.cmp(&a.root.seq))
    });
    Ok(out)
}

/// Messages after `read` that mention `user` in the conversation.
pub(super) fn mention_count<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    u: &str,
    c: &str,
    read: u64,
) -> StoreResult<u64> {
    count_after(r, &s.mentions, Key::new().s(t).s(u).s(c).bytes(), read)
}

/// The seq of message `id`, if it is stored (live or archived).
pub(super) fn seq_of_id<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    id: u64,
) -> StoreResult<Option<u64>> {
    r.get(&s.message_index, Key::new().s(t).s(c).n(id).bytes())
        .map_err(storage)?
        .map(|v| read_words::<1>(&v).map(|[seq]| seq))
        .transpose()
}
