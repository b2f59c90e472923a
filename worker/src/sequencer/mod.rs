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
//! This file has `plan`, which reads what a batch needs and runs each
//! command in order; `plan.rs` has the sequencer's inputs and outputs,
//! `keys.rs` the keys commands address rows by, and `prelude.rs` what
//! every file of the sequencer imports. `batch.rs` is
//! the working state of one batch and what every command shares (new ids,
//! appends, replies); then one file per command: `send.rs`, `create.rs`,
//! `members.rs` (adding and removing members) and `update.rs` (edits and
//! deletes); `consent.rs` is who may be put into groups unasked.

mod batch;
mod channels;
mod consent;
mod create;
mod keys;
mod members;
mod moderation;
mod pins;
mod plan;
mod polls;
mod prelude;
mod previews;
mod profiles;
mod reactions;
mod reports;
mod roles;
mod safety;
mod send;
#[cfg(test)]
mod tests;
mod update;

use batch::{Batch, MutationLog};
use prelude::*;

pub use plan::{Incoming, Outcome, Plan, Route, SequenceError};

/// Sequencer state for one partition.
pub struct Sequencer {
    cache: HashMap<ConversationKey, SequencerState>,
    cache_limit: usize,
    policies: Policies,
    /// When each member last sent, in conversations with slow mode on:
    /// what this writer saw, and what it read of the senders' own rows
    /// where it saw nothing (`safety::recall_last_sends`), so a writer
    /// that takes the partition over holds them to the same clock.
    last_sent: LastSent,
}

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

        safety::recall_last_sends(store, batch, &states, &mut self.last_sent).await?;

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
                Command::Vote(c) => vec![message_key(&c.by, c.message_id)],
                Command::ClosePoll(c) => vec![message_key(&c.by, c.message_id)],
                Command::Previews(c) => vec![MessageKey {
                    tenant: c.tenant.clone(),
                    conversation_id: c.conversation_id.clone(),
                    message_id: c.message_id,
                }],
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
            mut blocking,
            reports,
        } = safety::load(store, batch).await?;
        let invites = channels::load(store, batch, &mut blocking).await?;
        let profiles::Reads {
            profiles,
            audiences,
        } = profiles::load(store, batch, &self.policies).await?;

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
            replayed: check_sent,
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
            invites,
            reports,
            profiles,
            audiences,
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
                Command::Vote(c) => b.vote(c, incoming.reply_to.as_deref())?,
                Command::ClosePoll(c) => b.close_poll(c, incoming.reply_to.as_deref())?,
                Command::Previews(c) => b.previews(c),
                Command::Pin(c) => b.pin(c, true, incoming.reply_to.as_deref())?,
                Command::Unpin(c) => b.pin(c, false, incoming.reply_to.as_deref())?,
                Command::Block(c) => b.block(c, incoming.reply_to.as_deref())?,
                Command::Ban(c) => b.ban(c, incoming.reply_to.as_deref())?,
                Command::Mute(c) => b.mute(c, true, incoming.reply_to.as_deref())?,
                Command::Unmute(c) => b.mute(c, false, incoming.reply_to.as_deref())?,
                Command::Unban(c) => b.unban(c, incoming.reply_to.as_deref())?,
                Command::SetPolicy(c) => b.set_policy(c, incoming.reply_to.as_deref())?,
                Command::Report(c) => b.report(c, incoming.reply_to.as_deref())?,
                Command::ResolveReport(c) => b.resolve(c, incoming.reply_to.as_deref())?,
                Command::Profile(c) => b.profile(c, incoming.reply_to.as_deref())?,
                Command::Join(c) => b.join(c, incoming.reply_to.as_deref())?,
                Command::Invite(c) => b.invite(c, incoming.reply_to.as_deref())?,
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
