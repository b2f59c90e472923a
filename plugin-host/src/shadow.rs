//! Shadow versions: a version deployed beside the active one (KV key
//! `<tenant>.<hook>.shadow`) that sees the same live traffic under the same
//! limits, and whose decisions have no effect.
//!
//! Each hook call hands the shadow the same input and what was actually
//! decided (by the active version, or by the built-in default where there
//! is none). The shadow calls run off the message path on a pool of
//! `shadow_threads` threads with a bounded queue per tenant
//! (`pool.rs`): a slow or failing shadow never delays a message, one
//! tenant's shadows never wait behind another's, and when a queue is full
//! the comparison is skipped and counted as such. Every shadow call goes
//! through the same guard as an active version's (`version.rs`): the
//! tenant's call limits, and quarantine when it fails too often, after
//! which its comparisons are counted as quarantined without running it.
//! Each shadow counts how often it decided as the live path did
//! (`agreement.rs`).

use std::sync::Arc;

use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, Message, MessageId, Timestamp, UserId,
};

use crate::agreement::{Compared, Decision, Disagreement};
use crate::hook::{EditAction, EditRequest, Hook, ModerationInput, ReactionInput};
use crate::host::PluginHost;
use crate::limits::PluginLimits;
use crate::pool::Pool;
use crate::version::Loaded;

pub use crate::agreement::{Agreement, KEPT_DISAGREEMENTS, ShadowStats};

/// A hook call's input, owned, for the shadow pool.
pub(crate) enum Input {
    Moderation {
        conversation_id: ConversationId,
        kind: ConversationKind,
        member_count: usize,
        sender: UserId,
        content: Content,
        options: Box<SendOptions>,
        limits: ContentLimits,
    },
    Reaction {
        conversation_id: ConversationId,
        kind: ConversationKind,
        member_count: usize,
        sender: UserId,
        message_id: MessageId,
        emoji: String,
    },
    Edit {
        action: EditAction,
        actor: UserId,
        actor_is_admin: bool,
        message: Box<Message>,
        now: Timestamp,
    },
    FanOut {
        kind: ConversationKind,
        member_count: usize,
    },
}

impl Input {
    pub(crate) fn moderation(input: &ModerationInput<'_>, limits: &ContentLimits) -> Self {
        Input::Moderation {
            conversation_id: input.conversation_id.clone(),
            kind: input.kind,
            member_count: input.member_count,
            sender: input.sender.clone(),
            content: input.content.clone(),
            options: Box::new(input.options.clone()),
            limits: *limits,
        }
    }

    pub(crate) fn reaction(input: &ReactionInput<'_>) -> Self {
        Input::Reaction {
            conversation_id: input.conversation_id.clone(),
            kind: input.kind,
            member_count: input.member_count,
            sender: input.sender.clone(),
            message_id: input.message_id,
            emoji: input.emoji.to_owned(),
        }
    }

    pub(crate) fn edit(request: &EditRequest<'_>) -> Self {
        Input::Edit {
            action: request.action,
            actor: request.actor.clone(),
            actor_is_admin: request.actor_is_admin,
            message: Box::new(request.message.clone()),
            now: request.now,
        }
    }

    pub(crate) fn hook(&self) -> Hook {
        match self {
            Input::Moderation { .. } | Input::Reaction { .. } => Hook::Moderation,
            Input::Edit { .. } => Hook::EditPolicy,
            Input::FanOut { .. } => Hook::FanOut,
        }
    }
}

struct Job {
    shadow: Arc<Loaded>,
    input: Input,
    live: Decision,
}

/// This process's shadow calls: the pool that runs them.
pub(crate) struct ShadowRunner {
    pool: Pool<Job>,
}

impl ShadowRunner {
    pub(crate) fn start(host: Arc<PluginHost>) -> Self {
        let limits: &PluginLimits = host.limits();
        let (threads, queue, per_tenant) = (
            limits.shadow_threads,
            limits.shadow_queue,
            limits.shadow_queue_per_tenant,
        );
        let pool = Pool::start("plugin-shadow", threads, queue, per_tenant, move |job| {
            run(&host, job)
        });
        Self { pool }
    }

    /// Hands the shadow the input and the live decision; skipped (and
    /// counted) when its tenant's queue or the whole queue is full, and
    /// counted as quarantined without queueing while it is quarantined.
    pub(crate) fn compare(&self, shadow: Arc<Loaded>, input: Input, live: Decision) {
        let hook = input.hook();
        if shadow.quarantined() {
            count(&shadow, hook, Compared::Quarantined);
            return;
        }
        let tenant = shadow.tenant.clone();
        let job = Job {
            shadow,
            input,
            live,
        };
        if let Err(job) = self.pool.push(&tenant, job) {
            count(&job.shadow, hook, Compared::Skipped);
        }
    }
}

/// Counts a comparison in the shadow's report and in the metrics.
pub(crate) fn count(shadow: &Loaded, hook: Hook, compared: Compared) {
    crate::metrics::shadow_compared(hook, &shadow.tenant, compared.label());
    shadow.shadow_stats().count(compared);
}

/// Runs one shadow call (through the version's guard) and counts how it
/// compares.
fn run(host: &PluginHost, job: Job) {
    let Job {
        shadow,
        input,
        live,
    } = job;
    let tenant = &shadow.tenant;
    let hook = input.hook();
    let decided = match &input {
        Input::Moderation {
            conversation_id,
            kind,
            member_count,
            sender,
            content,
            options,
            limits,
        } => {
            let input = ModerationInput {
                tenant,
                conversation_id,
                kind: *kind,
                member_count: *member_count,
                sender,
                content,
                options,
            };
            shadow
                .call(host, |h, c, cfg| h.moderate(c, cfg, &input, limits))
                .map(|v| Decision::of_verdict(&v))
        }
        Input::Reaction {
            conversation_id,
            kind,
            member_count,
            sender,
            message_id,
            emoji,
        } => {
            let input = ReactionInput {
                tenant,
                conversation_id,
                kind: *kind,
                member_count: *member_count,
                sender,
                message_id: *message_id,
                emoji,
            };
            shadow
                .call(host, |h, c, cfg| h.moderate_reaction(c, cfg, &input))
                .map(|v| Decision::of_reaction(&v))
        }
        Input::Edit {
            action,
            actor,
            actor_is_admin,
            message,
            now,
        } => {
            let request = EditRequest {
                tenant,
                action: *action,
                actor,
                actor_is_admin: *actor_is_admin,
                message,
                now: *now,
            };
            shadow
                .call(host, |h, c, cfg| h.edit(c, cfg, &request))
                .map(|d| Decision::of_edit(&d))
        }
        Input::FanOut { kind, member_count } => shadow
            .call(host, |h, c, cfg| {
                h.fan_out(c, cfg, tenant, *kind, *member_count)
            })
            .map(Decision::of_fan_out),
    };
    let compared = match decided {
        // Counted, logged and judged for quarantine by the guard.
        Err(crate::host::CallError::Quarantined) => Compared::Quarantined,
        Err(_) => Compared::Failed,
        Ok(decision) if decision == live => Compared::Agree,
        Ok(decision) => Compared::Disagree(disagreement(&input, &live, &decision)),
    };
    count(&shadow, hook, compared);
}

/// What a disagreement names: the ids of its input, never content.
fn disagreement(input: &Input, live: &Decision, shadow: &Decision) -> Disagreement {
    let mut d = Disagreement {
        at: Timestamp::now(),
        conversation_id: None,
        message_id: None,
        sender: None,
        member_count: None,
        live: live.kind().to_owned(),
        shadow: shadow.kind().to_owned(),
    };
    match input {
        Input::Moderation {
            conversation_id,
            sender,
            member_count,
            ..
        } => {
            d.conversation_id = Some(conversation_id.clone());
            d.sender = Some(sender.clone());
            d.member_count = Some(*member_count);
        }
        Input::Reaction {
            conversation_id,
            sender,
            member_count,
            message_id,
            ..
        } => {
            d.conversation_id = Some(conversation_id.clone());
            d.message_id = Some(*message_id);
            d.sender = Some(sender.clone());
            d.member_count = Some(*member_count);
        }
        Input::Edit { message, .. } => {
            d.conversation_id = Some(message.conversation_id.clone());
            d.message_id = Some(message.message_id);
        }
        Input::FanOut { member_count, .. } => d.member_count = Some(*member_count),
    }
    d
}
