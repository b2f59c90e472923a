//! Who may edit or delete which message (F11, F12): the one place that
//! decides. The default: only the sender edits, within a window (15 minutes
//! by default); the sender or a tenant admin deletes, at any time; nobody
//! changes a system message. A tenant's edit-policy plugin replaces the
//! default for that tenant ([`Policies`]), except that system messages
//! stay unchangeable whatever a plugin says.

use std::sync::Arc;
use std::time::Duration;

use switchboard_plugin_host::fanout::{FanOut, FanOutPolicy};
use switchboard_plugin_host::{EditAction, EditRequest, Plugins};
use switchboard_protocol::safety::ConversationPolicy;
use switchboard_protocol::{Content, ConversationKind, Message, TenantId, Timestamp, UserId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Edit,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EditPolicy {
    /// How long after sending the sender may still edit.
    pub edit_window: Duration,
}

impl Default for EditPolicy {
    fn default() -> Self {
        Self {
            edit_window: Duration::from_secs(15 * 60),
        }
    }
}

impl EditPolicy {
    /// `Ok` if `actor` may do `action` to `message` at `now`; the reason
    /// otherwise.
    pub fn check(
        &self,
        action: Action,
        message: &Message,
        actor: &UserId,
        actor_is_admin: bool,
        now: Timestamp,
    ) -> Result<(), String> {
        changeable(message)?;
        let is_sender = message.sender_id == *actor;
        match action {
            Action::Edit if !is_sender => Err("only the sender edits a message".into()),
            Action::Edit => {
                let age = now.unix_ms().saturating_sub(message.created_at.unix_ms());
                if age as u128 > self.edit_window.as_millis() {
                    Err(format!(
                        "messages can be edited for {} minutes after sending",
                        self.edit_window.as_secs() / 60
                    ))
                } else {
                    Ok(())
                }
            }
            Action::Delete if is_sender || actor_is_admin => Ok(()),
            Action::Delete => Err("only the sender or a tenant admin deletes a message".into()),
        }
    }
}

/// Nobody changes a system message.
fn changeable(message: &Message) -> Result<(), String> {
    match message.content {
        Some(Content::System(_)) => Err("system messages cannot be changed".into()),
        _ => Ok(()),
    }
}

/// Consent to be put into groups (`sequencer/consent.rs`): the
/// deployment's default of a tenant's `unsolicited_groups_per_day`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsentPolicy {
    /// Groups and channels a user may be put into per day by people they
    /// do not know; 0: no limit.
    pub unsolicited_groups_per_day: u32,
}

impl Default for ConsentPolicy {
    fn default() -> Self {
        Self {
            unsolicited_groups_per_day: 20,
        }
    }
}

/// The policies a writer applies: the tenant's plugin where one is
/// deployed (and answers), the built-in policy otherwise.
#[derive(Clone, Default)]
pub struct Policies {
    pub edit: EditPolicy,
    pub fanout: FanOutPolicy,
    pub consent: ConsentPolicy,
    pub plugins: Option<Arc<Plugins>>,
    /// Tenants' quotas (members per conversation, unsolicited groups), as
    /// `sb_tenants` says now.
    pub tenants: switchboard_nats::records::tenants::TenantBook,
    /// Tenants' shadow bans (v1.3), as `sb_tenant_bans` says now.
    pub bans: switchboard_nats::records::bans::BanBook,
    /// Whether the deployment unfurls links (v1.3; each tenant may still
    /// turn them off).
    pub link_previews: bool,
}

impl Policies {
    /// How many groups a user of `tenant` may be put into per day by
    /// people they do not know: the tenant's quota, else the deployment's
    /// default; 0 is no limit.
    pub fn unsolicited_groups_per_day(&self, tenant: &TenantId) -> u32 {
        self.tenants
            .quotas(tenant)
            .unsolicited_groups_per_day
            .unwrap_or(self.consent.unsolicited_groups_per_day)
    }

    /// A conversation's policy as it applies now: with the tenant's
    /// default retention where it sets none of its own.
    pub fn effective(&self, tenant: &TenantId, policy: ConversationPolicy) -> ConversationPolicy {
        policy.with_tenant_retention(self.tenants.retention_days(tenant))
    }

    /// A quota refusal if a conversation of `tenant` with `members` members
    /// would pass the tenant's `max_members_per_conversation`.
    pub fn check_members(&self, tenant: &TenantId, members: usize) -> Result<(), String> {
        match self.tenants.quotas(tenant).max_members_per_conversation {
            Some(max) if members > usize::try_from(max).unwrap_or(usize::MAX) => Err(format!(
                "{members} members would pass the tenant's quota of {max} per conversation"
            )),
            _ => Ok(()),
        }
    }

    /// `Ok` if `actor` may do `action` to `message`; the reason otherwise.
    pub fn check_change(
        &self,
        tenant: &TenantId,
        action: Action,
        message: &Message,
        actor: &UserId,
        actor_is_admin: bool,
        now: Timestamp,
    ) -> Result<(), String> {
        // Whatever a plugin would say.
        changeable(message)?;
        let request = EditRequest {
            tenant,
            action: match action {
                Action::Edit => EditAction::Edit,
                Action::Delete => EditAction::Delete,
            },
            actor,
            actor_is_admin,
            message,
            now,
        };
        let builtin = || self.edit.check(action, message, actor, actor_is_admin, now);
        match &self.plugins {
            Some(p) => p.edit_policy(&request, builtin),
            None => builtin(),
        }
    }

    /// How a conversation fans out.
    pub fn fan_out(&self, tenant: &TenantId, kind: ConversationKind, members: usize) -> FanOut {
        match &self.plugins {
            Some(p) => p.fan_out_mode(tenant, kind, members, &self.fanout),
            None => self.fanout.mode(kind, members),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_protocol::{ClientMsgId, ConversationId, DeviceId, MessageId};

    fn message(sender: &str, at: i64, content: Content) -> Message {
        Message::plain(
            MessageId::from_u64(1),
            ConversationId::new("c").unwrap(),
            1,
            UserId::new(sender).unwrap(),
            DeviceId::default_device(),
            ClientMsgId::new("m").unwrap(),
            Some(content),
            Timestamp::from_unix_ms(at),
        )
    }

    #[test]
    fn the_default_policy() {
        let p = EditPolicy::default();
        let text = Content::Text { text: "x".into() };
        let m = message("alice", 0, text);
        let (alice, bob) = (UserId::new("alice").unwrap(), UserId::new("bob").unwrap());
        let at = Timestamp::from_unix_ms;
        assert!(p.check(Action::Edit, &m, &alice, false, at(60_000)).is_ok());
        assert!(
            p.check(Action::Edit, &m, &alice, false, at(15 * 60_000))
                .is_ok()
        );
        assert!(
            p.check(Action::Edit, &m, &alice, false, at(15 * 60_000 + 1))
                .is_err()
        );
        assert!(
            p.check(Action::Edit, &m, &bob, true, at(1)).is_err(),
            "admins do not edit"
        );
        assert!(
            p.check(Action::Delete, &m, &alice, false, at(i64::MAX / 2))
                .is_ok()
        );
        assert!(p.check(Action::Delete, &m, &bob, false, at(1)).is_err());
        assert!(p.check(Action::Delete, &m, &bob, true, at(1)).is_ok());
        let system = message(
            "alice",
            0,
            Content::System(switchboard_protocol::content::SystemEvent::about(
                "members_added",
                alice.clone(),
                vec![],
            )),
        );
        assert!(
            p.check(Action::Delete, &system, &alice, true, at(1))
                .is_err()
        );
    }
}
