//! A user's view of other people on Scylla: the conversation list a page
//! at a time, their memberships, whom their presence concerns, and whom
//! they know (consent to be put into groups).
//!
//! A page reads every conversation's position (`last_activity`, not the
//! preview), then whole rows only for the entries it returns. A user
//! knows someone when they share a conversation the user created or has
//! sent in (`speakers`).

use std::collections::BTreeSet;

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use switchboard_protocol::{ConversationId, ConversationKind, TenantId, Timestamp, UserId};
use switchboard_store::{
    Consent, ConsentQuery, ConversationDetail, ConversationKey, ConversationSummary, ListQuery,
    MemberRecord, StoreError, StoreResult,
};

use crate::client::ScyllaStore;
use crate::rows::{conversation_id, kind_of, marks, user_id};

impl ScyllaStore {
    /// The kind and creator of a conversation, if it exists (without its
    /// preview).
    async fn origin(&self, t: &str, c: &str) -> StoreResult<Option<(ConversationKind, String)>> {
        match self
            .st
            .conversation_origin
            .one(&self.session, (t, c))
            .await?
        {
            Some((kind, created_by)) => Ok(Some((kind_of(&kind)?, created_by))),
            None => Ok(None),
        }
    }

    /// Whether `u` created conversation `c` or has sent in it.
    async fn has_spoken(&self, t: &str, c: &str, u: &str, created_by: &str) -> StoreResult<bool> {
        if created_by == u {
            return Ok(true);
        }
        Ok(self
            .st
            .speaker
            .one(&self.session, (t, c, u))
            .await?
            .is_some())
    }

    pub(crate) async fn page_of_conversations(
        &self,
        tenant: &TenantId,
        user: &UserId,
        query: ListQuery,
    ) -> StoreResult<Vec<ConversationSummary>> {
        let (t, u) = (tenant.as_str(), user.as_str());
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let ids = self.conversation_ids_of(t, u).await?;
        let positions = self
            .each(ids, |c| async move {
                let at = self
                    .st
                    .conversation_activity
                    .one(&self.session, (t, c.as_str()))
                    .await?;
                Ok(at.map(|(at,)| (Timestamp::from_unix_ms(at), c)))
            })
            .await?;
        let mut positions: Vec<_> = positions
            .into_iter()
            .flatten()
            .map(|(at, c)| Ok((at, conversation_id(c)?)))
            .collect::<StoreResult<Vec<_>>>()?;
        positions.retain(|(at, c)| query.after.as_ref().is_none_or(|a| a.is_before(*at, c)));
        // `list_order`: most recent activity first, then id.
        positions.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        // Entries whose rows went between the two reads are skipped, so a
        // page reads a few more than it returns.
        let mut out = Vec::with_capacity(query.limit.min(positions.len()));
        let blocked = &self.blocked_set(tenant.as_str(), user.as_str()).await?;
        for chunk in positions.chunks(query.limit) {
            let ids: Vec<ConversationId> = chunk.iter().map(|(_, c)| c.clone()).collect();
            let found = self
                .each(ids, |c| async move {
                    self.summary(tenant, user, c, blocked).await
                })
                .await?;
            out.extend(found.into_iter().flatten());
            if out.len() >= query.limit {
                break;
            }
        }
        out.truncate(query.limit);
        Ok(out)
    }

    /// One entry of `user`'s list; `None` if they are no longer a member.
    async fn summary(
        &self,
        tenant: &TenantId,
        user: &UserId,
        c: ConversationId,
        blocked: &std::collections::HashSet<String>,
    ) -> StoreResult<Option<ConversationSummary>> {
        let (t, u, cs) = (tenant.as_str(), user.as_str(), c.as_str());
        let (member, conv, members, me, state, settings) = futures::try_join!(
            self.st.member.one(&self.session, (t, cs, u)),
            self.conv_row(t, cs),
            self.member_ids(t, cs),
            self.my_marks(t, cs, u),
            self.state_of(t, cs, u),
            self.settings_of(t, cs),
        )?;
        let mention_count = self.mention_count(t, u, cs, me.1).await?;
        let (Some((joined,)), Some(conv)) = (member, conv) else {
            return Ok(None);
        };
        let unread_count = self
            .unread_count(t, u, cs, me.1, conv.last_seq, blocked)
            .await?;
        let key = ConversationKey::new(tenant.clone(), c);
        let record = conv.record(&key)?.with_settings(settings);
        Ok(Some(ConversationSummary {
            record,
            member_ids: members
                .into_iter()
                .map(user_id)
                .collect::<StoreResult<Vec<_>>>()?,
            me: MemberRecord {
                user_id: user.clone(),
                joined_at: Timestamp::from_unix_ms(joined),
                delivered_seq: me.0,
                read_seq: me.1,
                role: Default::default(),
                settings: state.settings,
            },
            mention_count,
            unread_count,
        }))
    }

    pub(crate) async fn presence_audience(
        &self,
        tenant: &TenantId,
        user: &UserId,
    ) -> StoreResult<Vec<UserId>> {
        let (t, u) = (tenant.as_str(), user.as_str());
        let ids = self.conversation_ids_of(t, u).await?;
        let per_conversation = self
            .each(ids, |c| async move {
                match self.origin(t, &c).await? {
                    Some((ConversationKind::Direct, created_by))
                        if self.has_spoken(t, &c, u, &created_by).await? =>
                    {
                        self.member_ids(t, &c).await
                    }
                    _ => Ok(Vec::new()),
                }
            })
            .await?;
        per_conversation
            .into_iter()
            .flatten()
            .filter(|m| m != u)
            .collect::<BTreeSet<String>>()
            .into_iter()
            .map(user_id)
            .collect()
    }

    /// Whether `u` knows `actor`: stops at the first conversation that
    /// says so.
    async fn knows(&self, t: &str, u: &str, actor: &str) -> StoreResult<bool> {
        let ids = self.conversation_ids_of(t, u).await?;
        let mut checks = futures::stream::iter(ids)
            .map(|c| async move {
                // Most of a user's conversations are not the actor's.
                if self
                    .st
                    .member
                    .one(&self.session, (t, c.as_str(), actor))
                    .await?
                    .is_none()
                {
                    return Ok(false);
                }
                match self.origin(t, &c).await? {
                    Some((_, created_by)) => self.has_spoken(t, &c, u, &created_by).await,
                    None => Ok(false),
                }
            })
            .buffer_unordered(16);
        while let Some(known) = checks.next().await {
            if known? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(crate) async fn consent_of(&self, queries: Vec<ConsentQuery>) -> StoreResult<Vec<Consent>> {
        self.each(queries, |q| async move {
            let (t, u) = (q.tenant.as_str(), q.user.as_str());
            let (knows_actor, recent) = futures::try_join!(
                self.knows(t, u, q.actor.as_str()),
                self.unsolicited_count(t, u, q.since),
            )?;
            Ok(Consent {
                knows_actor,
                unsolicited: u32::try_from(recent).unwrap_or(u32::MAX),
            })
        })
        .await
    }

    /// Unsolicited adds of `user` since `since` (for a commit's check).
    pub(crate) async fn unsolicited_count(
        &self,
        t: &str,
        u: &str,
        since: Timestamp,
    ) -> StoreResult<usize> {
        let rows = self
            .st
            .unsolicited_since
            .stream(&self.session, (t, u, since.unix_ms()))
            .await?;
        rows.try_fold(0usize, |n, _| async move { Ok(n + 1) }).await
    }

    /// The conversations `u` is a member of, with their kind and member
    /// count; a listing whose conversation row is gone is passed over.
    pub(crate) async fn membership_list(
        &self,
        t: &str,
        u: &str,
    ) -> StoreResult<Vec<(ConversationId, ConversationKind, usize)>> {
        let ids = self.conversation_ids_of(t, u).await?;
        let found = self
            .each(ids, |c| async move {
                let (conv, members) =
                    futures::try_join!(self.conv_row(t, &c), self.member_ids(t, &c))?;
                match conv {
                    Some(conv) => Ok(Some((conversation_id(c)?, conv.kind, members.len()))),
                    None => Ok(None),
                }
            })
            .await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// One conversation with all its members, for a member.
    pub(crate) async fn conversation_detail(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> StoreResult<ConversationDetail> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        self.check_membership(t, c, reader.as_str()).await?;
        let (conv, members, all_marks) = futures::try_join!(
            self.conv_row(t, c),
            async {
                self.st
                    .members
                    .stream(&self.session, (t, c))
                    .await?
                    .try_collect::<Vec<_>>()
                    .await
            },
            async {
                self.st
                    .all_marks
                    .stream(&self.session, (t, c))
                    .await?
                    .try_collect::<Vec<_>>()
                    .await
            },
        )?;
        let conv = conv.ok_or(StoreError::NotFound)?;
        let mut by_user: BTreeMap<String, Vec<(i8, i64)>> = BTreeMap::new();
        for (u, mark, seq) in all_marks {
            by_user.entry(u).or_default().push((mark, seq));
        }
        let members = members
            .into_iter()
            .map(|(u, joined)| {
                let (delivered_seq, read_seq) = marks(by_user.remove(&u).unwrap_or_default())?;
                Ok(MemberRecord {
                    user_id: user_id(u)?,
                    joined_at: Timestamp::from_unix_ms(joined),
                    delivered_seq,
                    read_seq,
                    role: Default::default(),
                    settings: Default::default(),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let key = ConversationKey {
            tenant: tenant.clone(),
            conversation_id: conversation.clone(),
        };
        let (states, settings) = futures::try_join!(self.states_of(t, c), self.settings_of(t, c))?;
        let record = conv.record(&key)?.with_settings(settings);
        let mut members = members;
        switchboard_store::roles::fill_in(record.kind, &record.created_by, &mut members, &states);
        let read = members
            .iter()
            .find(|m| &m.user_id == reader)
            .map_or(0, |m| m.read_seq);
        let reader_mention_count = self.mention_count(t, reader.as_str(), c, read).await?;
        let blocked = self.blocked_set(t, reader.as_str()).await?;
        let reader_unread_count = self
            .unread_count(t, reader.as_str(), c, read, record.last_seq, &blocked)
            .await?;
        Ok(ConversationDetail {
            record,
            members,
            reader_mention_count,
            reader_unread_count,
        })
    }
}
