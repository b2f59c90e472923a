//! The sequencer's inputs and outputs: a command as it arrives, and the
//! plan of one batch (its mutations, and what to publish once they are
//! committed).

use std::collections::HashMap;

use switchboard_nats::envelope::{Command, CommandReply, Rejection};
use switchboard_protocol::{ConversationId, Message, ServerFrame, TenantId, Timestamp, UserId};
use switchboard_store::{ConversationKey, Mutation, SequencerState, StoreError};

/// A command with the subject its outcome goes to (REST commands only),
/// and the span of its trace (`Span::none()` when not traced), entered
/// while it is sequenced.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub command: Command,
    pub reply_to: Option<String>,
    pub span: tracing::Span,
}

/// How a message reaches the connected members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To each member's own event subject (fan-out on write).
    Users,
    /// Once, to the conversation's subject, which the gateways of connected
    /// members listen to (fan-out on read).
    Conversation,
}

/// What to publish after the batch is committed.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A new message to fan out: to every user in `recipients` (the
    /// sender included, for their other devices), or to the
    /// conversation's subject; its sending device gets its `ack`.
    Deliver {
        tenant: TenantId,
        message: Message,
        recipients: Vec<UserId>,
        route: Route,
        /// Who may get a push for it, by their settings (v1.1).
        push_to: Vec<UserId>,
    },
    /// A send stored before (a resend): its `ack` again, for the device
    /// that sent it, and nothing for anyone else.
    Answer { tenant: TenantId, message: Message },
    /// An edit or a deletion: the message as it is now, for every member.
    Update {
        tenant: TenantId,
        message: Message,
        recipients: Vec<UserId>,
        route: Route,
    },
    /// Tells these users' gateways to listen (or stop listening) to the
    /// conversation's subject for them.
    Listen {
        tenant: TenantId,
        conversation_id: ConversationId,
        users: Vec<UserId>,
        listen: bool,
    },
    /// A command that was refused, for the device that sent it.
    Reject {
        tenant: TenantId,
        sender: UserId,
        rejection: Rejection,
    },
    /// The outcome of a REST command.
    Reply {
        subject: String,
        reply: CommandReply,
    },
    /// A frame that is no message (a reaction, a pin, a member's own
    /// settings) for these users, or the conversation's subject (v1.1).
    Event {
        tenant: TenantId,
        conversation_id: ConversationId,
        frame: Box<ServerFrame>,
        recipients: Vec<UserId>,
        route: Route,
    },
    /// A reaction added to `author`'s message, whose settings let it push
    /// (v1.3): a push job for their devices.
    ReactionPush {
        tenant: TenantId,
        conversation_id: ConversationId,
        message_id: switchboard_protocol::MessageId,
        seq: u64,
        author: UserId,
        by: UserId,
        emoji: String,
        at: Timestamp,
    },
    /// A stored text whose links are to be unfurled (v1.3): a job for the
    /// previews stage, published after the commit (at most once, as push
    /// jobs are: a preview is a courtesy, never the message).
    Unfurl(switchboard_nats::push_jobs::PreviewJob),
    /// A moderation change made (v1.3: mutes, freezing), for the tenant's
    /// audit log; `id` names it for JetStream's dedupe, so a replayed
    /// command records it once.
    Audited {
        tenant: TenantId,
        entry: Box<switchboard_protocol::moderation::AuditEntry>,
        id: String,
    },
    /// A report stored (v1.2): for the tenant's webhooks only
    /// (`report.created`); its reporter gets the command's reply.
    Reported {
        tenant: TenantId,
        report: Box<switchboard_protocol::reports::Report>,
    },
}

/// The result of sequencing one batch.
#[derive(Debug, Default)]
pub struct Plan {
    pub mutations: Vec<Mutation>,
    pub outcomes: Vec<Outcome>,
    /// For each outcome, the index in the batch of the command it comes
    /// from (whose trace it continues).
    pub caused_by: Vec<usize>,
    /// States to cache once the mutations are committed.
    pub(super) staged: HashMap<ConversationKey, SequencerState>,
    /// Sends that slow mode counts, to remember once committed.
    pub(super) sent_at: HashMap<(ConversationKey, UserId), Timestamp>,
}

#[derive(Debug, thiserror::Error)]
pub enum SequenceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no message id available: {0}")]
    Ids(#[from] switchboard_nats::BackboneError),
}

/// When each member last sent, per conversation with slow mode on.
pub(crate) type LastSent = HashMap<ConversationKey, HashMap<UserId, Timestamp>>;
