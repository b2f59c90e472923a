//! Profiles (v1.3): a user changes their own, a tenant admin the
//! `custom` fields of anyone's. Every change of one profile comes to the
//! writer of the user's profile route (`profile_route_id`), which orders
//! them, stores the whole profile and tells everyone who shares a
//! conversation with the user: each member of the small conversations
//! (fan-out on write) once, however many conversations they share, and
//! once on the subject of each large one (fan-out on read), so a user in
//! a 10,000-member channel costs one event there, not 10,000.

use futures::{StreamExt, TryStreamExt};
use switchboard_nats::envelope::{ProfileCommand, profile_route_id};
use switchboard_protocol::profile::Profile;
use switchboard_store::StoreError;

use super::batch::{Audience, Batch};
use super::prelude::*;

/// Conversations whose members are read at once while finding who
/// hears of a change.
const MEMBER_READS_AT_ONCE: usize = 16;

/// What the batch's profile changes need: each user's profile as stored,
/// and who hears of it.
#[derive(Debug, Default)]
pub(super) struct Reads {
    pub profiles: HashMap<(TenantId, UserId), Profile>,
    pub audiences: HashMap<(TenantId, UserId), Audience>,
}

pub(super) async fn load(
    store: &dyn Store,
    batch: &[Incoming],
    policies: &Policies,
) -> Result<Reads, SequenceError> {
    let mut reads = Reads::default();
    let users: BTreeSet<(TenantId, UserId)> = batch
        .iter()
        .filter_map(|i| match &i.command {
            Command::Profile(c) => Some((c.by.tenant.clone(), c.user.clone())),
            _ => None,
        })
        .collect();
    for (tenant, user) in users {
        if let Some(Some(p)) = store
            .profiles(&tenant, vec![user.clone()])
            .await?
            .into_iter()
            .next()
        {
            reads.profiles.insert((tenant.clone(), user.clone()), p);
        }
        let audience = audience(store, policies, &tenant, &user).await?;
        reads.audiences.insert((tenant, user), audience);
    }
    Ok(reads)
}

async fn audience(
    store: &dyn Store,
    policies: &Policies,
    tenant: &TenantId,
    user: &UserId,
) -> Result<Audience, SequenceError> {
    let mut conversations = Vec::new();
    let mut small = Vec::new();
    for (conversation, kind, members) in store.memberships(tenant, user).await? {
        match policies.fan_out(tenant, kind, members) {
            FanOut::Read => conversations.push(conversation),
            FanOut::Write => small.push(conversation),
        }
    }
    let mut users: BTreeSet<UserId> = BTreeSet::from([user.clone()]);
    let mut members = futures::stream::iter(small)
        .map(|c| async move {
            match store.members(tenant, &c, user).await {
                Ok((_, members)) => Ok(members),
                // Left or gone since the list was read.
                Err(StoreError::NotAMember | StoreError::NotFound) => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        })
        .buffer_unordered(MEMBER_READS_AT_ONCE);
    while let Some(found) = members.try_next().await? {
        users.extend(found);
    }
    Ok(Audience {
        users: users.into_iter().collect(),
        conversations,
    })
}

impl Batch<'_> {
    /// `PATCH /v1/me/profile` and `PATCH /v1/admin/users/{user}/profile`.
    pub(super) fn profile(
        &mut self,
        c: &ProfileCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let by = &c.by;
        if profile_route_id(&c.user).as_ref() != Some(&by.conversation_id) {
            self.refuse(
                reply_to,
                ErrorCode::InvalidRequest,
                "a profile change goes to the user's profile route",
            );
            return Ok(());
        }
        if c.patch.custom.is_some() && !by.actor_is_admin {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "custom fields are set by tenant admins",
            );
            return Ok(());
        }
        if c.user != by.actor && !(by.actor_is_admin && c.patch.custom_only()) {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only the user changes their own profile",
            );
            return Ok(());
        }
        if let Err(e) = c.patch.check(by.at) {
            self.refuse(reply_to, ErrorCode::InvalidRequest, e.to_string());
            return Ok(());
        }
        let who = (by.tenant.clone(), c.user.clone());
        let current = self
            .profiles
            .get(&who)
            .cloned()
            .unwrap_or_else(|| Profile::empty(c.user.clone()));
        let next = match current.patched(&c.patch, by.at) {
            Ok(next) => next,
            Err(e) => {
                self.refuse(reply_to, ErrorCode::InvalidRequest, e.to_string());
                return Ok(());
            }
        };
        if next == current {
            self.done(reply_to, &by.conversation_id, false);
            return Ok(());
        }
        self.log.push_other(
            &key(&by.tenant, &by.conversation_id),
            Mutation::PutProfile {
                tenant: by.tenant.clone(),
                profile: Box::new(next.clone()),
            },
        );
        self.profiles.insert(who.clone(), next.clone());
        let frame = ServerFrame::ProfileUpdated { profile: next };
        if let Some(audience) = self.audiences.get(&who) {
            for conversation in &audience.conversations {
                self.outcomes.push(Outcome::Event {
                    tenant: by.tenant.clone(),
                    conversation_id: conversation.clone(),
                    frame: Box::new(frame.clone()),
                    recipients: Vec::new(),
                    route: Route::Conversation,
                });
            }
            self.outcomes.push(Outcome::Event {
                tenant: by.tenant.clone(),
                conversation_id: by.conversation_id.clone(),
                frame: Box::new(frame),
                recipients: audience.users.clone(),
                route: Route::Users,
            });
        }
        self.done(reply_to, &by.conversation_id, true);
        Ok(())
    }
}
