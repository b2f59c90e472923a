//! The sequencer: turns a batch of commands for one partition into store
//! mutations and the events to publish once they are committed.
//!
//! It is the single writer of every conversation in its partition (the
//! partition lease guarantees one sequencer per partition at a time), so
//! it assigns `seq` from its own cached `last_seq` without asking anyone.
//! The store's append check (`expected_last_seq`) catches the one case
//! where that belief is wrong: a writer that lost its lease without
//! noticing. Then the batch is refused, the cache dropped, and the batch
//! redone from the store's state.
//!
//! Every command is idempotent, so a batch that is delivered again after a
//! crash changes nothing: sends are found by their idempotency key, system
//! messages by their command id, and a conversation that exists is not
//! created again.
//!
//! This file has the sequencer's inputs and outputs and `plan`, which
//! reads what a batch needs and runs each command in order. `batch.rs` is
//! the working state of one batch and what every command shares (new ids,
//! appends, replies); then one file per command: `send.rs`, `create.rs`,
//! `members.rs` (adding and removing members) and `update.rs` (edits and
//! deletes); `consent.rs` is who may be put into groups unasked.

use std::collections::{BTreeSet, HashMap, HashSet};

use switchboard_nats::envelope::{
    Command, CommandReply, CreateConversationCommand, MembersCommand, Rejection, SendCommand,
    UpdateCommand,
};
use switchboard_nats::node_id::IdSource;
use switchboard_protocol::content::SystemEvent;
use switchboard_protocol::frames::request_type;
use switchboard_protocol::snowflake::decompose;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, ErrorCode, Message,
    MessageId, ServerFrame, TenantId, Timestamp, UserId,
};
use switchboard_store::{
    ConversationKey, ConversationRecord, MessageKey, Mutation, SentKey, SequencerState, Store,
    StoreError,
};

use crate::policy::{Action, Policies};
use switchboard_plugin_host::fanout::FanOut;

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
    staged: HashMap<ConversationKey, SequencerState>,
    /// Sends that slow mode counts, to remember once committed.
    sent_at: HashMap<(ConversationKey, UserId), Timestamp>,
}

#[derive(Debug, thiserror::Error)]
pub enum SequenceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no message id available: {0}")]
    Ids(#[from] switchboard_nats::BackboneError),
}

/// Sequencer state for one partition.
pub struct Sequencer {
    cache: HashMap<ConversationKey, SequencerState>,
    cache_limit: usize,
    policies: Policies,
    /// When each member last sent, in conversations with slow mode on.
    /// Kept in memory only: a writer that takes the partition over lets
    /// each member's next message through at once (ARCHITECTURE.md).
    last_sent: LastSent,
}

/// When each member last sent, per conversation with slow mode on.
pub(crate) type LastSent = HashMap<ConversationKey, HashMap<UserId, Timestamp>>;

fn key(tenant: &TenantId, conversation: &ConversationId) -> ConversationKey {
    ConversationKey {
        tenant: tenant.clone(),
        conversation_id: conversation.clone(),
    }
}

fn conversation_key(cmd: &Command) -> ConversationKey {
    key(cmd.tenant(), cmd.conversation_id())
}

/// The users of `users` that `keep` accepts, sorted and without repeats.
fn users_where(users: &[UserId], keep: impl Fn(&UserId) -> bool) -> Vec<UserId> {
    users
        .iter()
        .filter(|u| keep(u))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn system_client_msg_id(command_id: MessageId) -> Option<ClientMsgId> {
    ClientMsgId::new(format!("cmd-{command_id}")).ok()
}

/// The idempotency key a command's message is stored under.
fn sent_key(cmd: &Command) -> Option<SentKey> {
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
        Command::Block(_)
        | Command::Report(_)
        | Command::ResolveReport(_)
        | Command::CreateConversation(_)
        | Command::Edit(_)
        | Command::Delete(_)
        | Command::Settings(_)
        | Command::React(_) => return None,
    };
    Some(SentKey {
        tenant: cmd.tenant().clone(),
        conversation_id: cmd.conversation_id().clone(),
        sender,
        client_msg_id,
    })
}

/// Builds the batch's mutations in command order, merging consecutive
/// appends to one conversation.
#[derive(Default)]
struct MutationLog {
    mutations: Vec<Mutation>,
    /// Index of the append a conversation's next message can join.
    open_append: HashMap<ConversationKey, usize>,
}

impl MutationLog {
    fn push_other(&mut self, key: &ConversationKey, m: Mutation) {
        self.open_append.remove(key);
        self.mutations.push(m);
    }

    /// `inbox` is the conversation's fan-out; it only changes with a
    /// membership change, which closes the open append.
    fn push_message(
        &mut self,
        key: &ConversationKey,
        expected_last_seq: u64,
        message: Message,
        inbox: bool,
    ) {
        if let Some(&i) = self.open_append.get(key)
            && let Some(Mutation::Append { messages, .. }) = self.mutations.get_mut(i)
        {
            messages.push(message);
            return;
        }
        self.open_append.insert(key.clone(), self.mutations.len());
        self.mutations.push(Mutation::Append {
            key: key.clone(),
            expected_last_seq,
            messages: vec![message],
            inbox,
        });
    }
}

/// The message a v1.1 command names.
fn message_key(by: &switchboard_nats::envelope::Actor, message_id: MessageId) -> MessageKey {
    MessageKey {
        tenant: by.tenant.clone(),
        conversation_id: by.conversation_id.clone(),
        message_id,
    }
}

mod batch;
mod consent;
mod create;
mod members;
mod pins;
mod reactions;
mod reports;
mod roles;
mod safety;
mod send;
#[cfg(test)]
mod tests;
mod update;

use batch::Batch;

impl Sequencer {
    pub fn new(cache_limit: usize, policies: Policies) -> Self {
        Self {
            cache: HashMap::new(),
            cache_limit,
            policies,
            last_sent: HashMap::new(),
        }
    }

    /// Forgets cached state (after a refused commit, or when the cache is full).
    pub fn forget(&mut self) {
        self.cache.clear();
    }

    /// Called once the plan's mutations are committed.
    pub fn committed(&mut self, plan: &mut Plan) {
        if self.cache.len() + plan.staged.len() > self.cache_limit {
            // Simple bound: start over. States reload from the store on use.
            self.cache.clear();
            self.last_sent.clear();
        }
        self.cache.extend(plan.staged.drain());
        for ((key, user), at) in plan.sent_at.drain() {
            self.last_sent.entry(key).or_default().insert(user, at);
        }
    }

    /// Sequences a batch. Reads the store for state it has not cached and,
    /// with `check_sent`, for the idempotency keys of the batch; writes
    /// nothing.
    ///
    /// Without `check_sent` a retry that reaches the writer (one beyond
    /// JetStream's dedupe window) is sequenced as new, and the store
    /// refuses the commit because its key exists; the caller then plans
    /// again with `check_sent`. That keeps a read off the common path:
    /// first deliveries are almost never retries.
    ///
    /// `now` is when the batch's edits and deletes happen: their time
    /// stamp, and the time their edit window is measured at. It is passed
    /// in so that a plan depends on its inputs alone.
    pub async fn plan(
        &mut self,
        store: &dyn Store,
        ids: &dyn IdSource,
        batch: &[Incoming],
        check_sent: bool,
        now: Timestamp,
    ) -> Result<Plan, SequenceError> {
        let keys: BTreeSet<ConversationKey> =
            batch.iter().map(|i| conversation_key(&i.command)).collect();
        let missing: Vec<ConversationKey> = keys
            .iter()
            .filter(|k| !self.cache.contains_key(*k))
            .cloned()
            .collect();
        let mut states: HashMap<ConversationKey, Option<SequencerState>> = keys
            .iter()
            .filter_map(|k| self.cache.get(k).map(|s| (k.clone(), Some(s.clone()))))
            .collect();
        if !missing.is_empty() {
            let loaded = store.sequencer_states(missing.clone()).await?;
            states.extend(missing.into_iter().zip(loaded));
        }

        let sent_keys: Vec<SentKey> = if check_sent {
            batch.iter().filter_map(|i| sent_key(&i.command)).collect()
        } else {
            Vec::new()
        };
        let found = if sent_keys.is_empty() {
            Vec::new()
        } else {
            store.find_sent(sent_keys.clone()).await?
        };
        let sent = sent_keys
            .into_iter()
            .zip(found)
            .filter_map(|(k, m)| m.map(|m| (k, m)))
            .collect();

        // The messages this batch's edits and deletes are about.
        let targets: Vec<MessageKey> = batch
            .iter()
            .flat_map(|i| match &i.command {
                Command::Edit(c) | Command::Delete(c) => vec![MessageKey {
                    tenant: c.tenant.clone(),
                    conversation_id: c.conversation_id.clone(),
                    message_id: c.message_id,
                }],
                Command::React(c) => vec![message_key(&c.by, c.message_id)],
                // What a send replies to and the thread it goes into.
                Command::Send(c) => [c.options.reply_to, c.options.thread_id]
                    .into_iter()
                    .flatten()
                    .map(|id| MessageKey {
                        tenant: c.tenant.clone(),
                        conversation_id: c.conversation_id.clone(),
                        message_id: id,
                    })
                    .collect(),
                Command::Pin(c) | Command::Unpin(c) => vec![message_key(&c.by, c.message_id)],
                Command::Report(c) => vec![message_key(&c.by, c.message_id)],
                Command::ResolveReport(c) => vec![message_key(&c.by, c.message_id)],
                _ => Vec::new(),
            })
            .collect();
        let found = if targets.is_empty() {
            Vec::new()
        } else {
            store.find_messages(targets.clone()).await?
        };
        let messages: HashMap<(ConversationKey, MessageId), Message> = targets
            .into_iter()
            .zip(found)
            .filter_map(|(k, m)| m.map(|m| ((key(&k.tenant, &k.conversation_id), k.message_id), m)))
            .collect();
        let reactions = reactions::load(store, batch, &messages).await?;
        let pins = pins::load(store, batch).await?;
        let safety::Reads {
            bans,
            blocking,
            reports,
        } = safety::load(store, batch).await?;

        let asked = consent::queries(batch, &states, &self.policies, now);
        let consent = if asked.is_empty() {
            HashMap::new()
        } else {
            let answered = store.consent(asked.clone()).await?;
            consent::answers(asked, answered)
        };

        let mut b = Batch {
            ids,
            now,
            policies: &self.policies,
            messages,
            states,
            sent,
            log: MutationLog::default(),
            outcomes: Vec::new(),
            touched: HashSet::new(),
            consent,
            unsolicited: HashMap::new(),
            reactions,
            pins,
            bans,
            blocking,
            reports,
            last_sent: &self.last_sent,
            sent_at: HashMap::new(),
        };
        let mut caused_by = Vec::new();
        for (i, incoming) in batch.iter().enumerate() {
            let _traced = incoming.span.enter();
            match &incoming.command {
                Command::Send(c) => b.send(c, incoming.reply_to.as_deref())?,
                Command::CreateConversation(c) => b.create(c, incoming.reply_to.as_deref())?,
                Command::AddMembers(c) => b.add_members(c, incoming.reply_to.as_deref())?,
                Command::RemoveMembers(c) => b.remove_members(c, incoming.reply_to.as_deref())?,
                Command::Edit(c) => b.update(c, Action::Edit)?,
                Command::Delete(c) => b.update(c, Action::Delete)?,
                Command::SetRole(c) => b.set_role(c, incoming.reply_to.as_deref())?,
                Command::Settings(c) => b.settings(c, incoming.reply_to.as_deref())?,
                Command::React(c) => b.react(c)?,
                Command::Pin(c) => b.pin(c, true, incoming.reply_to.as_deref())?,
                Command::Unpin(c) => b.pin(c, false, incoming.reply_to.as_deref())?,
                Command::Block(c) => b.block(c, incoming.reply_to.as_deref())?,
                Command::Ban(c) => b.ban(c, incoming.reply_to.as_deref())?,
                Command::Unban(c) => b.unban(c, incoming.reply_to.as_deref())?,
                Command::SetPolicy(c) => b.set_policy(c, incoming.reply_to.as_deref())?,
                Command::Report(c) => b.report(c, incoming.reply_to.as_deref())?,
                Command::ResolveReport(c) => b.resolve(c, incoming.reply_to.as_deref())?,
            }
            caused_by.resize(b.outcomes.len(), i);
        }
        let staged = b
            .touched
            .iter()
            .filter_map(|k| b.states.get(k).cloned().flatten().map(|s| (k.clone(), s)))
            .collect();
        Ok(Plan {
            mutations: b.log.mutations,
            outcomes: b.outcomes,
            caused_by,
            staged,
            sent_at: b.sent_at,
        })
    }
}
