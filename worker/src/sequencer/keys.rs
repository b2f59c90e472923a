//! The keys a command addresses its rows by, and the user lists it
//! builds.

use std::collections::BTreeSet;

use switchboard_nats::envelope::{Actor, Command};
use switchboard_protocol::{ClientMsgId, ConversationId, MessageId, TenantId, UserId};
use switchboard_store::{ConversationKey, MessageKey, SentKey};

pub(super) fn key(tenant: &TenantId, conversation: &ConversationId) -> ConversationKey {
    ConversationKey {
        tenant: tenant.clone(),
        conversation_id: conversation.clone(),
    }
}

pub(super) fn conversation_key(cmd: &Command) -> ConversationKey {
    key(cmd.tenant(), cmd.conversation_id())
}

/// The users of `users` that `keep` accepts, sorted and without repeats.
pub(super) fn users_where(users: &[UserId], keep: impl Fn(&UserId) -> bool) -> Vec<UserId> {
    users
        .iter()
        .filter(|u| keep(u))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

pub(super) fn system_client_msg_id(command_id: MessageId) -> Option<ClientMsgId> {
    ClientMsgId::new(format!("cmd-{command_id}")).ok()
}

/// The idempotency key a command's message is stored under.
pub(super) fn sent_key(cmd: &Command) -> Option<SentKey> {
    let (sender, client_msg_id) = match cmd {
        Command::Send(c) => (c.sender.clone(), c.client_msg_id.clone()),
        Command::AddMembers(c) | Command::RemoveMembers(c) => {
            (c.actor.clone(), system_client_msg_id(c.command_id)?)
        }
        Command::SetRole(c) => (c.by.actor.clone(), system_client_msg_id(c.by.command_id)?),
        Command::Pin(c) | Command::Unpin(c) => {
            (c.by.actor.clone(), system_client_msg_id(c.by.command_id)?)
        }
        Command::Ban(c) | Command::Unban(c) => {
            (c.by.actor.clone(), system_client_msg_id(c.by.command_id)?)
        }
        Command::SetPolicy(c) => (c.by.actor.clone(), system_client_msg_id(c.by.command_id)?),
        Command::Join(c) => (c.by.actor.clone(), system_client_msg_id(c.by.command_id)?),
        Command::Block(_)
        | Command::Mute(_)
        | Command::Unmute(_)
        | Command::Invite(_)
        | Command::Profile(_)
        | Command::Report(_)
        | Command::ResolveReport(_)
        | Command::CreateConversation(_)
        | Command::Edit(_)
        | Command::Delete(_)
        | Command::Settings(_)
        | Command::React(_)
        | Command::Vote(_)
        | Command::ClosePoll(_)
        | Command::Previews(_) => return None,
    };
    Some(SentKey {
        tenant: cmd.tenant().clone(),
        conversation_id: cmd.conversation_id().clone(),
        sender,
        client_msg_id,
    })
}

/// The message a v1.1 command names.
pub(super) fn message_key(by: &Actor, message_id: MessageId) -> MessageKey {
    MessageKey {
        tenant: by.tenant.clone(),
        conversation_id: by.conversation_id.clone(),
        message_id,
    }
}
