//! Reads of the v1.2 safety rows on Scylla: a conversation's policy and
//! bans, a user's blocks.

use std::collections::{BTreeMap, BTreeSet};

use switchboard_protocol::safety::{Ban, Block, ConversationPolicy};
use switchboard_protocol::{ConversationKind, Role, Timestamp, UserId};
use switchboard_store::StoreResult;

use crate::client::ScyllaStore;
use crate::rows::{decode, user_id};

impl ScyllaStore {
    pub(crate) async fn policy_of(&self, t: &str, c: &str) -> StoreResult<ConversationPolicy> {
        match self.st.policy.one(&self.session, (t, c)).await? {
            Some((policy,)) => decode(&policy),
            None => Ok(ConversationPolicy::default()),
        }
    }

    /// Newest first.
    pub(crate) async fn ban_rows(&self, t: &str, c: &str) -> StoreResult<Vec<Ban>> {
        let mut bans = self
            .st
            .bans
            .all(&self.session, (t, c))
            .await?
            .into_iter()
            .map(|(ban,)| decode::<Ban>(&ban))
            .collect::<StoreResult<Vec<_>>>()?;
        bans.sort_by(|a, b| {
            b.banned_at
                .cmp(&a.banned_at)
                .then(a.user_id.cmp(&b.user_id))
        });
        Ok(bans)
    }

    /// Newest first.
    pub(crate) async fn block_rows(&self, t: &str, u: &str) -> StoreResult<Vec<Block>> {
        let mut blocks = self
            .st
            .blocks
            .all(&self.session, (t, u))
            .await?
            .into_iter()
            .map(|(blocked, at)| {
                Ok(Block {
                    user_id: user_id(blocked)?,
                    blocked_at: Timestamp::from_unix_ms(at),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        blocks.sort_by(|a, b| {
            b.blocked_at
                .cmp(&a.blocked_at)
                .then(a.user_id.cmp(&b.user_id))
        });
        Ok(blocks)
    }

    /// In a direct conversation, the members who block the other.
    pub(crate) async fn blocked_by(
        &self,
        t: &str,
        kind: ConversationKind,
        members: &BTreeMap<UserId, Role>,
    ) -> StoreResult<BTreeSet<UserId>> {
        let mut out = BTreeSet::new();
        if kind != ConversationKind::Direct {
            return Ok(out);
        }
        for (user, other) in members.keys().zip(members.keys().rev()) {
            if user != other && self.blocks_user(t, user.as_str(), other.as_str()).await? {
                out.insert(user.clone());
            }
        }
        Ok(out)
    }

    pub(crate) async fn blocks_user(&self, t: &str, u: &str, target: &str) -> StoreResult<bool> {
        Ok(self
            .st
            .block
            .one(&self.session, (t, u, target))
            .await?
            .is_some())
    }
}
