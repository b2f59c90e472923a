//! The store's rules (`crate::rules`) over fjall. The commit thread
//! applies a group of jobs to one write batch, committed at once: this
//! file, `apply/view.rs` (its reads) and `apply/writes.rs` (its row
//! changes) are the [`Commit`] view those jobs write through. Reads go to the cache first (which has every write of the
//! group, see `cache.rs`), then to the snapshot of the last commit. Key
//! layout and day buckets are decided here; what a mutation means is
//! decided in `rules.rs`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use fjall::{OwnedWriteBatch, Readable, Snapshot};
use switchboard_protocol::{
    ConversationId, ConversationKind, DeviceId, Message, MessageId, MessageVersion, TenantId,
    Timestamp, UserId,
};

use super::cache::{Pending, RowCache};
use super::codec::{decode, encode, storage};
use super::consent::unsolicited_times;
use super::keys::{Key, Spaces, read_words, str_after, words};
use super::lookup::{member_row, scan};
use super::read::{bucket_span, device_ids, member_ids, sent_seq, state};
use super::rows::{BucketRow, ConversationMeta, MemberRow, StateRow};
use super::states::member_state;
use crate::rules::{self, BucketSpan, Commit, InboxEntries, MarkReads, Marks, Placement};
use crate::{
    BucketKey, ConversationKey, ConversationRecord, MarkChange, MemberState, Mutation, PinRow,
    StoreError, StoreResult, UNSOLICITED_WINDOW_MS, day_bucket,
};

mod archive;
mod erasure;
mod extras;
mod safety;
mod sent;
mod view;
mod writes;

/// One job for the commit thread.
#[derive(Debug)]
pub(super) enum WriteOp {
    Commit(Vec<Mutation>),
    AckDelivered {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        conversation: ConversationId,
        seq: u64,
    },
    AckRead {
        tenant: TenantId,
        user: UserId,
        conversation: ConversationId,
        seq: u64,
    },
    RegisterDevice {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        at: Timestamp,
    },
    AckThreadRead {
        tenant: TenantId,
        user: UserId,
        conversation: ConversationId,
        root: MessageId,
        seq: u64,
    },
    /// One step of the inbox expiry sweep, from key `from`.
    ExpireInbox {
        before: Timestamp,
        from: Vec<u8>,
        budget: usize,
    },
}

/// What a job produced, handed to its caller once the group is committed.
#[derive(Debug)]
pub(super) enum Applied {
    Done,
    Mark(MarkChange),
    /// Entries looked at, entries removed, and the key the sweep goes on
    /// from.
    Expired(usize, usize, Option<Vec<u8>>),
}

/// Why an operation did not apply.
pub(super) enum ApplyError {
    /// Refused before anything was written: the group can go on.
    Clean(StoreError),
    /// Refused or failed after some writes: the batch must be thrown away.
    Dirty(StoreError),
}

/// Above this many inbox entries, a removal scans the inbox instead of
/// deleting entry by entry.
const MAX_POINT_DELETES: u64 = 1024;

/// Runs a future of the rules over this view to its end. Every read and
/// write of the view is synchronous (fjall on the commit thread), so the
/// future is ready at its first poll; if it ever were not, the job fails
/// instead of blocking the commit thread.
fn finish_now<T>(f: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => Err(StoreError::Unavailable(
            "a store write waited on something: the embedded commit thread never should".into(),
        )),
    }
}

/// The commit thread's view of one group.
pub(super) struct GroupView<'a> {
    pub snap: &'a Snapshot,
    pub batch: &'a mut OwnedWriteBatch,
    pub s: &'a Spaces,
    pub cache: &'a mut RowCache,
    pub pending: &'a mut Pending,
}

/// The two parts of a conversation key as they appear in row keys.
fn parts(c: &ConversationKey) -> (&str, &str) {
    (c.tenant.as_str(), c.conversation_id.as_str())
}

impl GroupView<'_> {
    /// Applies one job. A refusal is clean (the group goes on without the
    /// job) when the job wrote nothing to the batch; the rules refuse
    /// before they write, so only a failure midway leaves the batch dirty.
    pub fn apply(&mut self, op: &WriteOp) -> Result<Applied, ApplyError> {
        let before = self.batch.len();
        self.run(op).map_err(|e| {
            if self.batch.len() == before {
                ApplyError::Clean(e)
            } else {
                ApplyError::Dirty(e)
            }
        })
    }

    fn run(&mut self, op: &WriteOp) -> StoreResult<Applied> {
        match op {
            WriteOp::Commit(mutations) => finish_now(async {
                for m in mutations {
                    rules::apply(self, m).await?;
                }
                Ok(Applied::Done)
            }),
            WriteOp::AckRead {
                tenant,
                user,
                conversation,
                seq,
            } => {
                let c = ConversationKey::new(tenant.clone(), conversation.clone());
                finish_now(rules::ack_read(self, &c, user, *seq)).map(Applied::Mark)
            }
            WriteOp::AckDelivered {
                tenant,
                user,
                device,
                conversation,
                seq,
            } => {
                let c = ConversationKey::new(tenant.clone(), conversation.clone());
                finish_now(rules::ack_delivered(self, &c, user, device, *seq)).map(Applied::Mark)
            }
            WriteOp::AckThreadRead {
                tenant,
                user,
                conversation,
                root,
                seq,
            } => {
                let c = ConversationKey::new(tenant.clone(), conversation.clone());
                let (t, cs) = parts(&c);
                let Some(root_seq) =
                    super::extras::seq_of_id(self.snap, self.s, t, cs, root.as_u64())?
                else {
                    return Err(StoreError::NotFound);
                };
                finish_now(rules::ack_thread_read(self, &c, user, root_seq, *seq))
                    .map(|()| Applied::Done)
            }
            WriteOp::RegisterDevice {
                tenant,
                user,
                device,
                at,
            } => {
                let (t, u, d) = (tenant.as_str(), user.as_str(), device.as_str());
                let devices = self.device_list(t, u)?;
                if !devices.iter().any(|known| known == d) {
                    devices.push(d.to_owned());
                    self.batch.insert(
                        &self.s.devices,
                        Key::new().s(t).s(u).s(d).bytes(),
                        words([at.unix_ms() as u64]),
                    );
                }
                Ok(Applied::Done)
            }
            WriteOp::ExpireInbox {
                before,
                from,
                budget,
            } => self.expire_inbox(*before, from.clone(), *budget),
        }
    }

    fn state(&mut self, t: &str, c: &str) -> StoreResult<Option<StateRow>> {
        let key = Key::new().s(t).s(c).bytes();
        if let Some(row) = self.cache.states.get(&key) {
            return Ok(*row);
        }
        let row = state(self.snap, self.s, t, c)?;
        self.cache.states.insert(key, row);
        Ok(row)
    }

    /// Records the conversation's new position. The store derives it from
    /// the messages themselves; the cache remembers it for the rest of the
    /// group and after.
    fn set_state(&mut self, t: &str, c: &str, row: StateRow) {
        self.cache
            .states
            .insert(Key::new().s(t).s(c).bytes(), Some(row));
    }

    fn member(&mut self, t: &str, c: &str, u: &str) -> StoreResult<Option<MemberRow>> {
        let key = Key::new().s(t).s(c).s(u).bytes();
        if let Some(row) = self.cache.member_rows.get(&key) {
            return Ok(*row);
        }
        let row = member_row(self.snap, self.s, t, c, u)?;
        self.cache.member_rows.insert(key, row);
        Ok(row)
    }

    fn set_marks(&mut self, t: &str, c: &str, u: &str, row: MemberRow) {
        let key = Key::new().s(t).s(c).s(u).bytes();
        self.batch
            .insert(&self.s.member_marks, key.clone(), row.encode_marks());
        self.cache.member_rows.insert(key, Some(row));
    }

    /// The conversation's member list, loaded into the cache.
    fn member_list(&mut self, t: &str, c: &str) -> StoreResult<&mut Vec<String>> {
        let key = Key::new().s(t).s(c).bytes();
        if !self.cache.members.contains_key(&key) {
            let list = member_ids(self.snap, self.s, t, c)?;
            self.cache.members.insert(key.clone(), list);
        }
        self.cache
            .members
            .get_mut(&key)
            .ok_or_else(|| StoreError::Corrupt("member cache".into()))
    }

    /// The user's device list, loaded into the cache.
    fn device_list(&mut self, t: &str, u: &str) -> StoreResult<&mut Vec<String>> {
        let key = Key::new().s(t).s(u).bytes();
        if !self.cache.devices.contains_key(&key) {
            let list = device_ids(self.snap, self.s, t, u)?;
            self.cache.devices.insert(key.clone(), list);
        }
        self.cache
            .devices
            .get_mut(&key)
            .ok_or_else(|| StoreError::Corrupt("device cache".into()))
    }

    fn cursor(&mut self, key: &[u8]) -> StoreResult<u64> {
        if let Some(seq) = self.cache.cursors.get(key) {
            return Ok(*seq);
        }
        let seq = match self
            .snap
            .get(&self.s.device_cursors, key)
            .map_err(storage)?
        {
            Some(v) => read_words::<1>(&v)?[0],
            None => 0,
        };
        self.cache.cursors.insert(key.to_vec(), seq);
        Ok(seq)
    }

    fn insert_inbox_key(&mut self, key: Vec<u8>, at: Timestamp) {
        self.batch
            .insert(&self.s.inbox, key.clone(), words([at.unix_ms() as u64]));
        self.pending.inbox.insert(key);
    }

    fn remove_inbox_key(&mut self, key: Vec<u8>) {
        self.pending.inbox.remove(&key);
        self.batch.remove(&self.s.inbox, key);
    }

    /// Removes the inbox entries from `low` to `high` (inclusive),
    /// committed ones and this group's.
    fn remove_inbox_between(&mut self, low: Vec<u8>, high: Vec<u8>) -> StoreResult<()> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        for g in self.snap.range(&self.s.inbox, low.clone()..=high.clone()) {
            let (k, _) = g.into_inner().map_err(storage)?;
            doomed.push(k.to_vec());
        }
        doomed.extend(self.pending.inbox.range(low..=high).cloned());
        for k in doomed {
            self.remove_inbox_key(k);
        }
        Ok(())
    }

    /// Removes the inbox entries that start with `prefix`: committed ones
    /// and this group's.
    fn remove_inbox_prefix(&mut self, prefix: Vec<u8>) -> StoreResult<()> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        for kv in scan(self.snap, &self.s.inbox, prefix.clone()) {
            doomed.push(kv?.0.to_vec());
        }
        doomed.extend(
            self.pending
                .inbox
                .range(prefix.clone()..)
                .take_while(|k| k.starts_with(&prefix))
                .cloned(),
        );
        for k in doomed {
            self.remove_inbox_key(k);
        }
        Ok(())
    }

    /// Removes the inbox entries older than `before` among the next
    /// `budget` from `from`. It runs on the commit thread so that an entry
    /// refreshed by an edit in the same group is seen as fresh.
    fn expire_inbox(
        &mut self,
        before: Timestamp,
        from: Vec<u8>,
        budget: usize,
    ) -> StoreResult<Applied> {
        let before = before.unix_ms() as u64;
        let mut doomed = Vec::new();
        let mut next = None;
        let mut seen = 0;
        for g in self.snap.range(&self.s.inbox, from..) {
            let (k, v) = g.into_inner().map_err(storage)?;
            if seen == budget {
                next = Some(k.to_vec());
                break;
            }
            seen += 1;
            // An entry without a time predates expiry: it is old.
            let written = read_words::<1>(&v).map(|[ms]| ms).unwrap_or(0);
            if written < before && !self.pending.inbox.contains(k.as_ref()) {
                doomed.push(k.to_vec());
            }
        }
        let removed = doomed.len();
        for k in doomed {
            self.remove_inbox_key(k);
        }
        Ok(Applied::Expired(seen, removed, next))
    }

    /// The versions of message `seq` with their keys: this group's, or the
    /// committed ones (then remembered for the group).
    fn versions_with_keys(
        &mut self,
        t: &str,
        c: &str,
        seq: u64,
    ) -> StoreResult<&mut Vec<(Vec<u8>, MessageVersion)>> {
        let message_key = Key::new().s(t).s(c).n(seq).bytes();
        if !self.pending.versions.contains_key(&message_key) {
            let stored = scan(self.snap, &self.s.versions, message_key.clone())
                .map(|kv| {
                    let (k, v) = kv?;
                    Ok((k.to_vec(), decode(&v)?))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            self.pending.versions.insert(message_key.clone(), stored);
        }
        self.pending
            .versions
            .get_mut(&message_key)
            .ok_or_else(|| StoreError::Corrupt("version cache".into()))
    }
}
