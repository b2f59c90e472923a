//! Shadow versions: a version deployed beside the active one (KV key
//! `<tenant>.<hook>.shadow`) that sees the same live traffic under the same
//! limits, and whose decisions have no effect.
//!
//! Each hook call hands the shadow the same input and what was actually
//! decided (by the active version, or by the built-in default where there
//! is none) on a bounded queue. One thread per process runs the shadow
//! calls there, off the message path: a slow or failing shadow never
//! delays a message, and when the queue is full the comparison is skipped
//! and counted as such. Each shadow counts how often it decided as the
//! live path did, and keeps its latest disagreements: ids and decision
//! kinds, never content.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, Message, TenantId, Timestamp, UserId,
};

use crate::fanout::FanOut;
use crate::hook::{EditAction, EditRequest, Hook, ModerationInput};
use crate::host::{PluginHost, Verdict};
use crate::registry::Loaded;

/// Comparisons waiting for the shadow thread; past it they are skipped.
const QUEUE: usize = 1024;

/// Disagreements each shadow keeps, the latest.
pub const KEPT_DISAGREEMENTS: usize = 20;

/// A decision, as the comparison and the report see it: its kind, and
/// for a rewrite the content (compared, never reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    Reject,
    Rewrite(Content),
    Deny,
    OnWrite,
    OnRead,
}

impl Decision {
    fn kind(&self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Reject => "reject",
            Decision::Rewrite(_) => "rewrite",
            Decision::Deny => "deny",
            Decision::OnWrite => "on_write",
            Decision::OnRead => "on_read",
        }
    }

    pub(crate) fn of_verdict(verdict: &Option<Verdict>) -> Self {
        match verdict {
            None | Some(Verdict::Allow) => Decision::Allow,
            Some(Verdict::Reject(_)) => Decision::Reject,
            Some(Verdict::Rewrite(c)) => Decision::Rewrite(c.clone()),
        }
    }

    pub(crate) fn of_edit(decision: &Result<(), String>) -> Self {
        match decision {
            Ok(()) => Decision::Allow,
            Err(_) => Decision::Deny,
        }
    }

    pub(crate) fn of_fan_out(mode: FanOut) -> Self {
        match mode {
            FanOut::Write => Decision::OnWrite,
            FanOut::Read => Decision::OnRead,
        }
    }
}

/// What a disagreement names: ids only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Disagreement {
    pub at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<ConversationId>,
    /// The message an edit or delete was about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<switchboard_protocol::MessageId>,
    /// The sender of a moderated message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<UserId>,
    /// The conversation size a fan-out decision was about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_count: Option<usize>,
    /// What was decided: `allow`, `reject`, `rewrite`, `deny`,
    /// `on_write` or `on_read`.
    pub live: String,
    /// What the shadow would have decided.
    pub shadow: String,
}

/// How a shadow compares, in one process or summed over several.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Agreement {
    /// Calls of the shadow.
    pub calls: u64,
    /// It decided as the live path did.
    pub agree: u64,
    pub disagree: u64,
    /// The shadow's call failed (a trap or a limit).
    pub failed: u64,
    /// Comparisons not made: the queue was full, or the live call failed.
    pub skipped: u64,
    /// The latest disagreements, newest first.
    pub disagreements: Vec<Disagreement>,
}

impl Agreement {
    /// Adds `other`'s counts, keeping the newest disagreements of both.
    pub fn add(&mut self, other: &Agreement) {
        self.calls += other.calls;
        self.agree += other.agree;
        self.disagree += other.disagree;
        self.failed += other.failed;
        self.skipped += other.skipped;
        self.disagreements
            .extend(other.disagreements.iter().cloned());
        self.disagreements.sort_by_key(|d| std::cmp::Reverse(d.at));
        self.disagreements.truncate(KEPT_DISAGREEMENTS);
    }
}

/// One shadow version's counts in this process.
#[derive(Debug, Default)]
pub struct ShadowStats {
    calls: AtomicU64,
    agree: AtomicU64,
    disagree: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
    disagreements: Mutex<VecDeque<Disagreement>>,
}

impl ShadowStats {
    pub fn report(&self) -> Agreement {
        let disagreements = self
            .disagreements
            .lock()
            .map(|d| d.iter().rev().cloned().collect())
            .unwrap_or_default();
        Agreement {
            calls: self.calls.load(Ordering::Relaxed),
            agree: self.agree.load(Ordering::Relaxed),
            disagree: self.disagree.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            disagreements,
        }
    }

    pub(crate) fn skip(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }
}

/// A hook call's input, owned, for the shadow thread.
pub(crate) enum Input {
    Moderation {
        conversation_id: ConversationId,
        kind: ConversationKind,
        member_count: usize,
        sender: UserId,
        content: Content,
        limits: ContentLimits,
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
            limits: *limits,
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

    fn hook(&self) -> Hook {
        match self {
            Input::Moderation { .. } => Hook::Moderation,
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

/// The queue to this process's shadow thread.
pub(crate) struct ShadowRunner {
    jobs: SyncSender<Job>,
}

impl ShadowRunner {
    pub(crate) fn start(host: Arc<PluginHost>) -> Self {
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(QUEUE);
        let spawned = std::thread::Builder::new()
            .name("plugin-shadow".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    run(&host, job);
                }
            });
        if let Err(e) = spawned {
            // Every comparison is then skipped (the queue has no reader).
            tracing::error!(error = %e, "cannot start the plugin shadow thread");
        }
        Self { jobs }
    }

    /// Hands the shadow the input and the live decision; skipped (and
    /// counted) when the queue is full.
    pub(crate) fn compare(&self, shadow: Arc<Loaded>, input: Input, live: Decision) {
        if let Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) =
            self.jobs.try_send(Job {
                shadow,
                input,
                live,
            })
        {
            job.shadow.shadow_stats().skip();
            crate::metrics::shadow_compared(job.input.hook(), &job.shadow.tenant, "skipped");
        }
    }
}

/// Runs one shadow call and counts how it compares.
fn run(host: &PluginHost, job: Job) {
    let Job {
        shadow,
        input,
        live,
    } = job;
    let stats = shadow.shadow_stats();
    stats.calls.fetch_add(1, Ordering::Relaxed);
    let tenant: &TenantId = &shadow.tenant;
    let hook = input.hook();
    let decided = match shadow.compiled() {
        Err(e) => Err(e.to_string()),
        Ok(compiled) => {
            let config = shadow.config();
            match &input {
                Input::Moderation {
                    conversation_id,
                    kind,
                    member_count,
                    sender,
                    content,
                    limits,
                } => {
                    let input = ModerationInput {
                        tenant,
                        conversation_id,
                        kind: *kind,
                        member_count: *member_count,
                        sender,
                        content,
                    };
                    host.moderate(compiled, config, &input, limits)
                        .map(|v| Decision::of_verdict(&v))
                        .map_err(|e| e.to_string())
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
                    host.edit(compiled, config, &request)
                        .map(|d| Decision::of_edit(&d))
                        .map_err(|e| e.to_string())
                }
                Input::FanOut { kind, member_count } => host
                    .fan_out(compiled, config, tenant, *kind, *member_count)
                    .map(Decision::of_fan_out)
                    .map_err(|e| e.to_string()),
            }
        }
    };
    let outcome = match decided {
        Err(why) => {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(tenant = %tenant, hook = %hook, digest = %shadow.record.digest, error = %why, "shadow call failed");
            "failed"
        }
        Ok(decision) if decision == live => {
            stats.agree.fetch_add(1, Ordering::Relaxed);
            "agree"
        }
        Ok(decision) => {
            stats.disagree.fetch_add(1, Ordering::Relaxed);
            let mut d = Disagreement {
                at: Timestamp::now(),
                conversation_id: None,
                message_id: None,
                sender: None,
                member_count: None,
                live: live.kind().to_owned(),
                shadow: decision.kind().to_owned(),
            };
            match input {
                Input::Moderation {
                    conversation_id,
                    sender,
                    member_count,
                    ..
                } => {
                    d.conversation_id = Some(conversation_id);
                    d.sender = Some(sender);
                    d.member_count = Some(member_count);
                }
                Input::Edit { message, .. } => {
                    d.conversation_id = Some(message.conversation_id.clone());
                    d.message_id = Some(message.message_id);
                }
                Input::FanOut { member_count, .. } => d.member_count = Some(member_count),
            }
            if let Ok(mut kept) = stats.disagreements.lock() {
                if kept.len() >= KEPT_DISAGREEMENTS {
                    kept.pop_front();
                }
                kept.push_back(d);
            }
            "disagree"
        }
    };
    crate::metrics::shadow_compared(hook, tenant, outcome);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disagreement(at_ms: i64) -> Disagreement {
        Disagreement {
            at: Timestamp::from_unix_ms(at_ms),
            conversation_id: None,
            message_id: None,
            sender: None,
            member_count: Some(at_ms as usize),
            live: "allow".into(),
            shadow: "reject".into(),
        }
    }

    #[test]
    fn reports_add_up_and_keep_the_newest_disagreements() {
        let mut total = Agreement::default();
        let a = Agreement {
            calls: 10,
            agree: 8,
            disagree: 2,
            disagreements: (0..15).map(disagreement).collect(),
            ..Default::default()
        };
        let b = Agreement {
            calls: 5,
            agree: 5,
            failed: 1,
            disagreements: (100..110).map(disagreement).collect(),
            ..Default::default()
        };
        total.add(&a);
        total.add(&b);
        assert_eq!(
            (total.calls, total.agree, total.disagree, total.failed),
            (15, 13, 2, 1)
        );
        assert_eq!(total.disagreements.len(), KEPT_DISAGREEMENTS);
        assert_eq!(
            total.disagreements[0].member_count,
            Some(109),
            "newest first"
        );
    }

    #[test]
    fn a_rewrite_agrees_only_with_the_same_content() {
        let text = |t: &str| Content::Text { text: t.into() };
        let rewrite = |t: &str| Decision::of_verdict(&Some(Verdict::Rewrite(text(t))));
        assert_eq!(rewrite("a"), rewrite("a"));
        assert_ne!(rewrite("a"), rewrite("b"));
        assert_eq!(Decision::of_verdict(&None), Decision::Allow);
        assert_eq!(
            Decision::of_verdict(&Some(Verdict::Reject("x".into()))),
            Decision::of_verdict(&Some(Verdict::Reject("y".into()))),
            "a rejection agrees whatever its reason"
        );
    }
}
