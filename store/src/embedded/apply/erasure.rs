//! The rows of an erasure (v1.2) over fjall: the user's own rows, found
//! by the prefix of every keyspace keyed by tenant and user, and the
//! conversation rows the rules rewrite. The same group's other jobs
//! rarely touch an erased user; a row one of them wrote is not in the
//! snapshot these scans read, which is why the worker's erasure job
//! commits each step alone.

use switchboard_protocol::safety::Ban;

use super::super::keys::{str_part, trailing_u64};
use super::*;
use crate::erasure::Erasure;

impl GroupView<'_> {
    /// Every keyspace keyed by (tenant, user, ...), and blocks of the user
    /// kept under others' names.
    pub(super) fn erase_user_keys(&mut self, tenant: &TenantId, user: &str) -> StoreResult<()> {
        let t = tenant.as_str();
        let prefix = Key::new().s(t).s(user).bytes();
        let spaces = [
            &self.s.user_conversations,
            &self.s.joined,
            &self.s.unsolicited,
            &self.s.inbox,
            &self.s.devices,
            &self.s.device_cursors,
            &self.s.thread_marks,
            &self.s.mentions,
            &self.s.sent_by,
            &self.s.blocks,
            &self.s.profiles,
        ];
        for space in spaces {
            for kv in scan(self.snap, space, prefix.clone()) {
                self.batch.remove(space, kv?.0.to_vec());
            }
        }
        for kv in scan(self.snap, &self.s.blocks, Key::new().s(t).bytes()) {
            let (k, _) = kv?;
            if str_part(&k, 2)? == user {
                self.batch.remove(&self.s.blocks, k.to_vec());
            }
        }
        // Others' unsolicited adds by the user name them as the actor.
        for kv in scan(self.snap, &self.s.unsolicited, Key::new().s(t).bytes()) {
            let (k, actor) = kv?;
            if actor.as_ref() == user.as_bytes() {
                self.batch.remove(&self.s.unsolicited, k.to_vec());
            }
        }
        // The cache forgets what it knew of the user's rows.
        self.cache.devices.insert(prefix.clone(), Vec::new());
        self.cache.cursors.retain(|k, _| !k.starts_with(&prefix));
        self.pending.inbox.retain(|k| !k.starts_with(&prefix));
        self.pending
            .thread_marks
            .retain(|k, _| !k.starts_with(&prefix));
        self.pending.unsolicited.remove(&prefix);
        Ok(())
    }

    /// The unread index's rows of `user`'s messages in the conversation,
    /// archived ones included: found through the user's `sent_by` rows,
    /// which archiving keeps.
    pub(super) fn uncount_all_of(&mut self, c: &ConversationKey, user: &str) -> StoreResult<()> {
        let (t, cid) = parts(c);
        for kv in scan(
            self.snap,
            &self.s.sent_by,
            Key::new().s(t).s(user).s(cid).bytes(),
        ) {
            let seq = trailing_u64(&kv?.0)?;
            self.batch
                .insert(&self.s.uncounted, Key::new().s(t).s(cid).n(seq).bytes(), []);
        }
        Ok(())
    }

    pub(super) fn ban_rows(&self, key: &ConversationKey) -> StoreResult<Vec<Ban>> {
        let (t, c) = parts(key);
        scan(self.snap, &self.s.bans, Key::new().s(t).s(c).bytes())
            .map(|kv| kv.and_then(|(_, v)| decode(&v)))
            .collect()
    }

    pub(super) fn anonymise_meta(
        &mut self,
        key: &ConversationKey,
        e: Erasure<'_>,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).bytes();
        let Some(v) = self.snap.get(&self.s.conversations, &k).map_err(storage)? else {
            return Ok(());
        };
        let mut meta: ConversationMeta = decode(&v)?;
        if e.creator(&mut meta.created_by) {
            self.batch.insert(&self.s.conversations, k, encode(&meta)?);
        }
        Ok(())
    }

    /// Reaction keys are (tenant, conversation, seq, user, emoji): the
    /// user is the string after the seq's 8 bytes.
    pub(super) fn remove_reaction_rows_of(
        &mut self,
        key: &ConversationKey,
        user: &str,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let prefix = Key::new().s(t).s(c).bytes();
        let mut whose = user.as_bytes().to_vec();
        whose.push(0);
        for k in self.reaction_keys(&prefix)? {
            if k.get(prefix.len() + 8..)
                .is_some_and(|rest| rest.starts_with(&whose))
            {
                self.set_reaction(k, None);
            }
        }
        Ok(())
    }
}
