//! Reads of v1.3's open channels on Scylla: the tenant's directory (one
//! partition per tenant), member counts, invites, and where a
//! newcomer's history starts.

use switchboard_protocol::channels::Invite;
use switchboard_protocol::{ConversationId, TenantId, UserId};
use switchboard_store::{ConversationKey, Listing, StoreResult};

use crate::client::ScyllaStore;
use crate::rows::{conversation_id, decode, limit_db};

impl ScyllaStore {
    pub(crate) async fn directory_rows(
        &self,
        tenant: &TenantId,
        after: Option<&ConversationId>,
        limit: usize,
    ) -> StoreResult<Vec<(ConversationId, Listing)>> {
        let after = after.map_or("", ConversationId::as_str);
        self.st
            .directory
            .all(&self.session, (tenant.as_str(), after, limit_db(limit)))
            .await?
            .into_iter()
            .map(|(c, listing)| Ok((conversation_id(c)?, decode(&listing)?)))
            .collect()
    }

    /// Counted from the member rows, as a commit counts them.
    pub(crate) async fn member_count_rows(
        &self,
        keys: Vec<ConversationKey>,
    ) -> StoreResult<Vec<u64>> {
        self.each(keys, |k| async move {
            let ids = self
                .member_ids(k.tenant.as_str(), k.conversation_id.as_str())
                .await?;
            Ok(ids.len() as u64)
        })
        .await
    }

    /// Newest first.
    pub(crate) async fn invite_rows(&self, t: &str, c: &str) -> StoreResult<Vec<Invite>> {
        let mut all = self
            .st
            .invites
            .all(&self.session, (t, c))
            .await?
            .into_iter()
            .map(|(i,)| decode::<Invite>(&i))
            .collect::<StoreResult<Vec<_>>>()?;
        all.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.code.cmp(&a.code)));
        Ok(all)
    }

    pub(crate) async fn invite_row(
        &self,
        tenant: &TenantId,
        code: &str,
    ) -> StoreResult<Option<Invite>> {
        let t = tenant.as_str();
        let Some((c,)) = self.st.invite_code.one(&self.session, (t, code)).await? else {
            return Ok(None);
        };
        match self
            .st
            .invite
            .one(&self.session, (t, c.as_str(), code))
            .await?
        {
            Some((i,)) => decode(&i).map(Some),
            None => Ok(None),
        }
    }

    pub(crate) async fn floors(
        &self,
        tenant: &TenantId,
        user: &UserId,
        conversations: Vec<ConversationId>,
    ) -> StoreResult<Vec<u64>> {
        let (t, u) = (tenant.as_str(), user.as_str());
        self.each(conversations, |c| async move {
            let state = self.state_of(t, c.as_str(), u).await?;
            Ok(state.history_from.unwrap_or(0))
        })
        .await
    }
}
