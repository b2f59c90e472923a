//! Consent to be put into groups: a user may be put into at most the
//! tenant's `unsolicited_groups_per_day` groups and channels a day by
//! people they do not know, that is people with whom they share no
//! conversation that they created or have sent in. Past it such adds are
//! refused (`forbidden`); people they know, and tenant admins adding
//! members, are never limited. Direct conversations are not groups: a
//! direct conversation opened unasked shows its opener's messages, but
//! not the user's presence, until the user answers.
//!
//! What the store knows is read before the batch (`queries`); the adds a
//! batch makes count as it goes; the store checks again at commit, which
//! catches what other partitions' writers committed in between (the
//! commit is then refused and the batch planned again).

use std::collections::{HashMap, HashSet};

use switchboard_store::{
    Consent, ConsentQuery, SequencerState, UNSOLICITED_WINDOW_MS, UnsolicitedAdds,
};

use super::batch::{Batch, ConsentKey};
use super::prelude::*;

/// The users a command may put into a group or channel unasked, with
/// the actor: every user it names but the actor (the sequencer decides
/// later which of them are new members).
fn added_by(
    cmd: &Command,
    states: &HashMap<ConversationKey, Option<SequencerState>>,
) -> Option<(Vec<UserId>, UserId)> {
    match cmd {
        Command::CreateConversation(c)
            if c.kind != ConversationKind::Direct && !c.actor_is_admin =>
        {
            Some((c.members.clone(), c.actor.clone()))
        }
        Command::AddMembers(c) if !c.actor_is_admin => {
            let key = key(&c.tenant, &c.conversation_id);
            // Unknown (created in this batch) or a group: ask.
            match states.get(&key) {
                Some(Some(s)) if s.kind == ConversationKind::Direct => None,
                Some(Some(s)) => Some((
                    users_where(&c.users, |u| !s.members.contains(u)),
                    c.actor.clone(),
                )),
                _ => Some((c.users.clone(), c.actor.clone())),
            }
        }
        _ => None,
    }
}

/// What to ask the store before planning `batch`: nothing for tenants
/// without a limit.
pub(super) fn queries(
    batch: &[Incoming],
    states: &HashMap<ConversationKey, Option<SequencerState>>,
    policies: &Policies,
    now: Timestamp,
) -> Vec<ConsentQuery> {
    let since = Timestamp::from_unix_ms(now.unix_ms().saturating_sub(UNSOLICITED_WINDOW_MS));
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for incoming in batch {
        let tenant = incoming.command.tenant();
        if policies.unsolicited_groups_per_day(tenant) == 0 {
            continue;
        }
        let Some((users, actor)) = added_by(&incoming.command, states) else {
            continue;
        };
        for user in users {
            if user != actor && seen.insert((tenant.clone(), user.clone(), actor.clone())) {
                out.push(ConsentQuery {
                    tenant: tenant.clone(),
                    user,
                    actor: actor.clone(),
                    since,
                });
            }
        }
    }
    out
}

/// The answers by (tenant, user, actor).
pub(super) fn answers(
    queries: Vec<ConsentQuery>,
    consents: Vec<Consent>,
) -> HashMap<ConsentKey, Consent> {
    queries
        .into_iter()
        .zip(consents)
        .map(|(q, c)| ((q.tenant, q.user, q.actor), c))
        .collect()
}

impl Batch<'_> {
    /// The unsolicited adds among `added` (new members of a group or
    /// channel of `tenant`, put in by `actor`), counted against their
    /// users; or why the command is refused: a user at the limit.
    pub(super) fn unsolicited_adds(
        &mut self,
        tenant: &TenantId,
        actor: &UserId,
        added: &[UserId],
    ) -> Result<Option<UnsolicitedAdds>, String> {
        let limit = self.policies.unsolicited_groups_per_day(tenant);
        if limit == 0 {
            return Ok(None);
        }
        let mut strangers = Vec::new();
        let mut full = Vec::new();
        for user in added.iter().filter(|u| *u != actor) {
            let k = (tenant.clone(), user.clone(), actor.clone());
            // Not asked (a bug): the store's own check still holds.
            let consent = self.consent.get(&k).copied().unwrap_or_default();
            if consent.knows_actor {
                continue;
            }
            let earlier = self
                .unsolicited
                .get(&(tenant.clone(), user.clone()))
                .copied()
                .unwrap_or(0);
            if consent.unsolicited.saturating_add(earlier) >= limit {
                full.push(user.as_str());
            } else {
                strangers.push(user.clone());
            }
        }
        if !full.is_empty() {
            return Err(format!(
                "{} cannot be put into more groups by people they have not talked with \
                 today (at most {limit} a day); someone they know can add them, or you can \
                 once they have written to you",
                full.join(", ")
            ));
        }
        if strangers.is_empty() {
            return Ok(None);
        }
        for user in &strangers {
            *self
                .unsolicited
                .entry((tenant.clone(), user.clone()))
                .or_default() += 1;
        }
        Ok(Some(UnsolicitedAdds {
            users: strangers,
            actor: actor.clone(),
            at: self.now,
            limit,
        }))
    }
}
