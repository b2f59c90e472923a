//! Polls (v1.3): the `poll` content kind, what a `vote` may name, and
//! how a poll's results change with one vote.
//!
//! A poll message carries its results: exact counts per option, whether
//! it was closed by hand, and (unless anonymous) the latest voters of
//! each option. Who voted for what is kept beside it, one row per voter,
//! so that `me` (the reader's own choice) is filled in per reader and a
//! vote never rewrites every voter.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::UserId;
use crate::timestamp::Timestamp;

/// The fewest options a poll has.
pub const MIN_OPTIONS: usize = 2;
/// The most options a poll has.
pub const MAX_OPTIONS: usize = 10;
/// The longest question, in characters.
pub const MAX_QUESTION_CHARS: usize = 300;
/// The longest option text, in characters.
pub const MAX_OPTION_CHARS: usize = 100;
/// The longest option id, in bytes (`A-Z a-z 0-9 _ -`).
pub const MAX_OPTION_ID_BYTES: usize = 32;
/// How many voters of each option a non-anonymous poll's results name,
/// the latest first; the counts stay exact past it.
pub const MAX_VOTERS_SHOWN: usize = 100;

/// Content kind `poll`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PollContent {
    /// 1 to 300 characters.
    pub question: String,
    /// 2 to 10, ids unique within the poll.
    pub options: Vec<PollOption>,
    /// Whether a voter may choose more than one option.
    #[serde(default)]
    pub multiple: bool,
    /// Whether the results hide who chose what (`voters` absent).
    #[serde(default)]
    pub anonymous: bool,
    /// When voting ends by itself (in the future when sent); absent or
    /// null: when closed by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes_at: Option<Timestamp>,
}

/// One choice of a poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PollOption {
    /// 1 to 32 of `A-Z a-z 0-9 _ -`, chosen by the sender.
    pub id: String,
    /// 1 to 100 characters.
    pub text: String,
}

/// A poll message's `poll_results`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PollResults {
    /// Voters per option id, every option present.
    pub counts: BTreeMap<String, u64>,
    /// Whether voting has ended: closed by hand, or `closes_at` passed.
    pub closed: bool,
    /// Unless the poll is anonymous: per option id, its latest voters
    /// (at most 100, the latest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voters: Option<BTreeMap<String, Vec<UserId>>>,
    /// The reader's own choice: option ids, empty when they have not
    /// voted.
    #[serde(default)]
    pub me: Vec<String>,
}

/// What a vote row is called among a user's marks on a message: the
/// store keeps a voter's choice in the rows that hold their reactions
/// (one per user, message and mark; gone with the message, and with the
/// user's erasure), under a name no emoji can take (emoji hold no
/// whitespace: `reaction::check_emoji`).
pub const VOTE_MARK_PREFIX: &str = " vote:";

/// The mark that stands for a vote for `option_id`.
pub fn vote_mark(option_id: &str) -> String {
    format!("{VOTE_MARK_PREFIX}{option_id}")
}

/// A user's marks on one message split into their reaction emoji and
/// the option ids they voted for.
pub fn split_marks(marks: &[String]) -> (Vec<String>, Vec<String>) {
    let mut emoji = Vec::new();
    let mut votes = Vec::new();
    for m in marks {
        match m.strip_prefix(VOTE_MARK_PREFIX) {
            Some(id) => votes.push(id.to_owned()),
            None => emoji.push(m.clone()),
        }
    }
    (emoji, votes)
}

/// `POST /v1/conversations/{id}/messages/{message_id}/votes`: the
/// caller's vote, as the `vote` frame's `option_ids`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct VoteRequest {
    /// The options chosen (at most 10); empty retracts the vote.
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_OPTIONS)))]
    pub option_ids: Vec<String>,
}

/// Why a poll or a vote is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PollError {
    #[error("the question must be 1 to {MAX_QUESTION_CHARS} characters")]
    Question,
    #[error("a poll has {MIN_OPTIONS} to {MAX_OPTIONS} options")]
    OptionCount,
    #[error("an option id is 1 to {MAX_OPTION_ID_BYTES} of A-Z a-z 0-9 _ -")]
    OptionId,
    #[error("option ids must be unique within the poll")]
    DuplicateOption,
    #[error("an option's text must be 1 to {MAX_OPTION_CHARS} characters")]
    OptionText,
    #[error("closes_at must be in the future")]
    ClosesInPast,
    #[error("the poll has no option {0:?}")]
    UnknownOption(String),
    #[error("an option may be chosen once")]
    RepeatedChoice,
    #[error("this poll takes one option per voter")]
    OneOnly,
}

fn nonblank_within(text: &str, max_chars: usize) -> bool {
    !text.trim().is_empty() && text.chars().count() <= max_chars
}

impl PollContent {
    /// Checks a poll a client sends: its shape and bounds. `closes_at`
    /// is checked against the time the poll is sent
    /// ([`PollContent::check_closes_at`]).
    pub fn validate(&self) -> Result<(), PollError> {
        if !nonblank_within(&self.question, MAX_QUESTION_CHARS) {
            return Err(PollError::Question);
        }
        if !(MIN_OPTIONS..=MAX_OPTIONS).contains(&self.options.len()) {
            return Err(PollError::OptionCount);
        }
        for (i, o) in self.options.iter().enumerate() {
            let id_ok = !o.id.is_empty()
                && o.id.len() <= MAX_OPTION_ID_BYTES
                && o.id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !id_ok {
                return Err(PollError::OptionId);
            }
            if self.options[..i].iter().any(|p| p.id == o.id) {
                return Err(PollError::DuplicateOption);
            }
            if !nonblank_within(&o.text, MAX_OPTION_CHARS) {
                return Err(PollError::OptionText);
            }
        }
        Ok(())
    }

    /// A poll sent (or scheduled for) `at` must close after it.
    pub fn check_closes_at(&self, at: Timestamp) -> Result<(), PollError> {
        match self.closes_at {
            Some(t) if t <= at => Err(PollError::ClosesInPast),
            _ => Ok(()),
        }
    }

    /// Its text as search, pushes, previews and plugins see it: the
    /// question, then one line per option.
    pub fn text(&self) -> String {
        let mut out = self.question.clone();
        for o in &self.options {
            out.push_str("\n- ");
            out.push_str(&o.text);
        }
        out
    }

    /// Every text of it that a word list reads: the question and each
    /// option's text.
    pub fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        std::iter::once(&mut self.question).chain(self.options.iter_mut().map(|o| &mut o.text))
    }

    /// The results of a poll nobody voted in yet.
    pub fn fresh_results(&self) -> PollResults {
        PollResults {
            counts: self.options.iter().map(|o| (o.id.clone(), 0)).collect(),
            closed: false,
            voters: (!self.anonymous).then(|| {
                self.options
                    .iter()
                    .map(|o| (o.id.clone(), Vec::new()))
                    .collect()
            }),
            me: Vec::new(),
        }
    }

    /// Whether voting has ended at `now`: closed by hand (`results`) or
    /// its time passed.
    pub fn is_closed(&self, results: &PollResults, now: Timestamp) -> bool {
        results.closed || self.closes_at.is_some_and(|t| t <= now)
    }

    /// Checks a voter's choice, and gives it back in the poll's order of
    /// options (so that the same choice is the same, whatever its order).
    pub fn choice(&self, option_ids: &[String]) -> Result<Vec<String>, PollError> {
        for (i, id) in option_ids.iter().enumerate() {
            if !self.options.iter().any(|o| &o.id == id) {
                return Err(PollError::UnknownOption(id.chars().take(40).collect()));
            }
            if option_ids[..i].contains(id) {
                return Err(PollError::RepeatedChoice);
            }
        }
        if option_ids.len() > 1 && !self.multiple {
            return Err(PollError::OneOnly);
        }
        Ok(self
            .options
            .iter()
            .filter(|o| option_ids.contains(&o.id))
            .map(|o| o.id.clone())
            .collect())
    }
}

impl PollResults {
    /// The results after `voter` changed their choice from `before` to
    /// `after` (both checked, in the poll's order): counts move, and the
    /// voter leaves the lists of the options they left and heads those
    /// they chose.
    pub fn apply(&mut self, voter: &UserId, before: &[String], after: &[String]) {
        for id in before.iter().filter(|id| !after.contains(id)) {
            if let Some(n) = self.counts.get_mut(id) {
                *n = n.saturating_sub(1);
            }
            if let Some(list) = self.voters.as_mut().and_then(|v| v.get_mut(id)) {
                list.retain(|u| u != voter);
            }
        }
        for id in after.iter().filter(|id| !before.contains(id)) {
            *self.counts.entry(id.clone()).or_default() += 1;
            if let Some(list) = self
                .voters
                .as_mut()
                .map(|v| v.entry(id.clone()).or_default())
            {
                list.retain(|u| u != voter);
                list.insert(0, voter.clone());
                list.truncate(MAX_VOTERS_SHOWN);
            }
        }
    }

    /// The results as one reader sees them at `now`: their own choice,
    /// and closed where the poll's time has passed.
    pub fn for_reader(&mut self, poll: &PollContent, me: Vec<String>, now: Timestamp) {
        self.closed = poll.is_closed(self, now);
        self.me = me;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll(n: usize) -> PollContent {
        PollContent {
            question: "Lunch?".into(),
            options: (0..n)
                .map(|i| PollOption {
                    id: format!("o{i}"),
                    text: format!("Option {i}"),
                })
                .collect(),
            multiple: false,
            anonymous: false,
            closes_at: None,
        }
    }

    fn user(s: &str) -> UserId {
        UserId::new(s).unwrap()
    }

    #[test]
    fn options_are_counted_at_and_past_their_bounds() {
        assert_eq!(poll(1).validate(), Err(PollError::OptionCount));
        assert_eq!(poll(2).validate(), Ok(()));
        assert_eq!(poll(10).validate(), Ok(()));
        assert_eq!(poll(11).validate(), Err(PollError::OptionCount));
    }

    #[test]
    fn texts_and_ids_are_bounded() {
        let mut p = poll(2);
        p.question = "q".repeat(MAX_QUESTION_CHARS);
        assert_eq!(p.validate(), Ok(()));
        p.question.push('q');
        assert_eq!(p.validate(), Err(PollError::Question));
        p.question = "  ".into();
        assert_eq!(p.validate(), Err(PollError::Question));

        let mut p = poll(2);
        p.options[1].text = "é".repeat(MAX_OPTION_CHARS);
        assert_eq!(p.validate(), Ok(()));
        p.options[1].text.push('é');
        assert_eq!(p.validate(), Err(PollError::OptionText));
        p.options[1].text = String::new();
        assert_eq!(p.validate(), Err(PollError::OptionText));

        let mut p = poll(2);
        p.options[0].id = "a".repeat(MAX_OPTION_ID_BYTES);
        assert_eq!(p.validate(), Ok(()));
        p.options[0].id.push('a');
        assert_eq!(p.validate(), Err(PollError::OptionId));
        p.options[0].id = "a b".into();
        assert_eq!(p.validate(), Err(PollError::OptionId));
        p.options[0].id = "o1".into();
        assert_eq!(p.validate(), Err(PollError::DuplicateOption));
    }

    #[test]
    fn closing_time_must_follow_the_send() {
        let mut p = poll(2);
        let now = Timestamp::from_unix_ms(1_000_000);
        p.closes_at = Some(now);
        assert_eq!(p.check_closes_at(now), Err(PollError::ClosesInPast));
        p.closes_at = Some(Timestamp::from_unix_ms(1_000_001));
        assert_eq!(p.check_closes_at(now), Ok(()));
        assert!(!p.is_closed(&p.fresh_results(), now));
        assert!(p.is_closed(&p.fresh_results(), Timestamp::from_unix_ms(1_000_001)));
    }

    #[test]
    fn a_choice_is_checked_and_put_in_the_polls_order() {
        let mut p = poll(3);
        assert_eq!(p.choice(&[]), Ok(vec![]));
        assert_eq!(p.choice(&["o2".into()]), Ok(vec!["o2".to_string()]));
        assert_eq!(
            p.choice(&["o1".into(), "o2".into()]),
            Err(PollError::OneOnly)
        );
        assert_eq!(
            p.choice(&["x".into()]),
            Err(PollError::UnknownOption("x".into()))
        );
        p.multiple = true;
        assert_eq!(
            p.choice(&["o2".into(), "o0".into()]),
            Ok(vec!["o0".to_string(), "o2".to_string()])
        );
        assert_eq!(
            p.choice(&["o2".into(), "o2".into()]),
            Err(PollError::RepeatedChoice)
        );
    }

    #[test]
    fn a_vote_moves_counts_and_voters() {
        let p = poll(2);
        let mut r = p.fresh_results();
        let (a, b) = (user("alice"), user("bob"));
        r.apply(&a, &[], &["o0".into()]);
        r.apply(&b, &[], &["o0".into()]);
        assert_eq!(r.counts["o0"], 2);
        assert_eq!(r.voters.as_ref().unwrap()["o0"], vec![b.clone(), a.clone()]);
        r.apply(&a, &["o0".into()], &["o1".into()]);
        assert_eq!((r.counts["o0"], r.counts["o1"]), (1, 1));
        assert_eq!(r.voters.as_ref().unwrap()["o0"], vec![b.clone()]);
        assert_eq!(r.voters.as_ref().unwrap()["o1"], vec![a.clone()]);
        r.apply(&b, &["o0".into()], &[]);
        assert_eq!(r.counts["o0"], 0);
        assert!(r.voters.as_ref().unwrap()["o0"].is_empty());
    }

    #[test]
    fn voters_shown_stop_at_the_bound_and_counts_do_not() {
        let p = poll(2);
        let mut r = p.fresh_results();
        for i in 0..=MAX_VOTERS_SHOWN {
            r.apply(&user(&format!("u{i}")), &[], &["o0".into()]);
        }
        assert_eq!(r.counts["o0"], MAX_VOTERS_SHOWN as u64 + 1);
        let shown = &r.voters.as_ref().unwrap()["o0"];
        assert_eq!(shown.len(), MAX_VOTERS_SHOWN);
        assert_eq!(shown[0], user(&format!("u{MAX_VOTERS_SHOWN}")));
    }

    #[test]
    fn vote_marks_are_told_from_emoji() {
        let mark = vote_mark("o1");
        assert!(mark.chars().any(char::is_whitespace));
        let (emoji, votes) = split_marks(&["👍".into(), mark]);
        assert_eq!(emoji, vec!["👍".to_string()]);
        assert_eq!(votes, vec!["o1".to_string()]);
    }

    #[test]
    fn anonymous_results_name_nobody() {
        let mut p = poll(2);
        p.anonymous = true;
        let mut r = p.fresh_results();
        r.apply(&user("alice"), &[], &["o1".into()]);
        assert_eq!(r.voters, None);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("voters").is_none());
        assert_eq!(json["counts"]["o1"], 1);
    }
}
