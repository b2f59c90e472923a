//! How a shadow version compares with the live decisions: the decision
//! kinds compared, one shadow's counts in this process, and the report
//! the admin API sums over processes. Ids and decision kinds only, never
//! content.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use switchboard_protocol::{Content, ConversationId, Timestamp, UserId};

use crate::fanout::FanOut;
use crate::host::Verdict;

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
    pub(crate) fn kind(&self) -> &'static str {
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

    /// A reaction's verdict (`None`: the version sees no reactions, so
    /// the reaction is allowed).
    pub(crate) fn of_reaction(verdict: &Option<Result<(), String>>) -> Self {
        match verdict {
            None | Some(Ok(())) => Decision::Allow,
            Some(Err(_)) => Decision::Reject,
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
    /// Comparisons not made: the queue (the process's or the tenant's
    /// share of it) was full, or the live call failed.
    pub skipped: u64,
    /// Comparisons not made because the shadow was quarantined after
    /// failing too often, as an active version would be.
    #[serde(default)]
    pub quarantined: u64,
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
        self.quarantined += other.quarantined;
        self.disagreements
            .extend(other.disagreements.iter().cloned());
        self.disagreements.sort_by_key(|d| std::cmp::Reverse(d.at));
        self.disagreements.truncate(KEPT_DISAGREEMENTS);
    }
}

/// How one comparison went.
#[derive(Debug)]
pub(crate) enum Compared {
    Agree,
    Disagree(Disagreement),
    Failed,
    Skipped,
    Quarantined,
}

impl Compared {
    /// The outcome label of `switchboard_plugin_shadow_calls_total`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Compared::Agree => "agree",
            Compared::Disagree(_) => "disagree",
            Compared::Failed => "failed",
            Compared::Skipped => "skipped",
            Compared::Quarantined => "quarantined",
        }
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
    quarantined: AtomicU64,
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
            quarantined: self.quarantined.load(Ordering::Relaxed),
            disagreements,
        }
    }

    /// Counts one comparison (a call, or one not made).
    pub(crate) fn count(&self, compared: Compared) {
        let called = matches!(
            compared,
            Compared::Agree | Compared::Disagree(_) | Compared::Failed
        );
        let counter = match compared {
            Compared::Agree => &self.agree,
            Compared::Failed => &self.failed,
            Compared::Skipped => &self.skipped,
            Compared::Quarantined => &self.quarantined,
            Compared::Disagree(d) => {
                if let Ok(mut kept) = self.disagreements.lock() {
                    if kept.len() >= KEPT_DISAGREEMENTS {
                        kept.pop_front();
                    }
                    kept.push_back(d);
                }
                &self.disagree
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if called {
            self.calls.fetch_add(1, Ordering::Relaxed);
        }
    }
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
            quarantined: 3,
            disagreements: (0..15).map(disagreement).collect(),
            ..Default::default()
        };
        let b = Agreement {
            calls: 5,
            agree: 5,
            failed: 1,
            quarantined: 4,
            disagreements: (100..110).map(disagreement).collect(),
            ..Default::default()
        };
        total.add(&a);
        total.add(&b);
        assert_eq!(
            (
                total.calls,
                total.agree,
                total.disagree,
                total.failed,
                total.quarantined
            ),
            (15, 13, 2, 1, 7)
        );
        assert_eq!(total.disagreements.len(), KEPT_DISAGREEMENTS);
        assert_eq!(
            total.disagreements[0].member_count,
            Some(109),
            "newest first"
        );
    }

    #[test]
    fn calls_are_the_comparisons_made() {
        let stats = ShadowStats::default();
        for c in [
            Compared::Agree,
            Compared::Disagree(disagreement(1)),
            Compared::Failed,
            Compared::Skipped,
            Compared::Quarantined,
        ] {
            stats.count(c);
        }
        let r = stats.report();
        assert_eq!(
            (
                r.calls,
                r.agree,
                r.disagree,
                r.failed,
                r.skipped,
                r.quarantined
            ),
            (3, 1, 1, 1, 1, 1)
        );
        assert_eq!(r.disagreements.len(), 1);
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
