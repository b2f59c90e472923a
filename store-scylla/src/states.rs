//! Members' v1.1 state on Scylla: the `member_states` rows (a given role,
//! the member's own settings) and the roles that follow from them
//! (`switchboard_store::roles`, the rule every backend applies).

use std::collections::BTreeMap;

use futures::TryStreamExt;
use switchboard_protocol::{ConversationKind, Role, Timestamp, UserId};
use switchboard_store::roles::{Joined, effective};
use switchboard_store::{MemberState, StoreResult};

use crate::client::ScyllaStore;
use crate::rows::{decode, user_id};

impl ScyllaStore {
    /// One member's state; the default when no row is stored.
    pub(crate) async fn state_of(&self, t: &str, c: &str, u: &str) -> StoreResult<MemberState> {
        match self.st.member_state.one(&self.session, (t, c, u)).await? {
            Some((state,)) => decode(&state),
            None => Ok(MemberState::default()),
        }
    }

    /// The conversation's stored states, by user id.
    pub(crate) async fn states_of(
        &self,
        t: &str,
        c: &str,
    ) -> StoreResult<BTreeMap<String, MemberState>> {
        self.st
            .member_states
            .stream(&self.session, (t, c))
            .await?
            .try_collect::<Vec<_>>()
            .await?
            .into_iter()
            .map(|(u, state)| Ok((u, decode(&state)?)))
            .collect()
    }

    /// Every member's role, from the `members` rows and the states.
    pub(crate) async fn roles_of(
        &self,
        t: &str,
        c: &str,
        kind: ConversationKind,
        created_by: &UserId,
        states: &BTreeMap<String, MemberState>,
    ) -> StoreResult<BTreeMap<UserId, Role>> {
        let joined = self
            .st
            .members
            .stream(&self.session, (t, c))
            .await?
            .try_collect::<Vec<_>>()
            .await?
            .into_iter()
            .map(|(u, at)| {
                Ok(Joined {
                    given: states.get(&u).and_then(|s| s.role),
                    user: user_id(u)?,
                    at: Timestamp::from_unix_ms(at),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(effective(kind, created_by, &joined))
    }
}
