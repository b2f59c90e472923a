//! Whether a writer's consumer can still be trusted to hand out its
//! partition's commands in stream order: decisions on plain data, with
//! the time passed in. `consume.rs` feeds in what happened (a delivery,
//! an error of the message stream, a tick with the connection's
//! reconnect epoch, the answers to what it was told to ask) and does what
//! comes out: go on, ask the consumer something, or start over with a
//! fresh consumer.
//!
//! Why starting over: a delivery lost in flight (a broken connection, a
//! consumer leader gone with its node) still counts as handed out and
//! would come back only after `ack_wait`, behind newer commands, breaking
//! each sender's order. A fresh consumer starts at the first unacked
//! command. The losses show as:
//! 1. a gap in consumer sequences, which are consecutive;
//! 2. after a reconnect, a consumer that handed out more than arrived,
//!    asked once a second has passed with nothing arriving (a loss with
//!    nothing behind it shows no gap);
//! 3. an error of the message stream other than a pull request that
//!    could not be sent (which is sent again): two missed heartbeats mean
//!    the consumer's leader changed and the pull it held is gone.
//!
//! And one more reason: 4. a consumer led by another node than its
//! stream. The balancer (`balance.rs`) moves stream leaders but not
//! consumers; one left apart doubles the partition's exposure to one
//! node's loss, and after a rolling restart consumers pile up on the
//! nodes that stayed up. Looked at every `PLACEMENT_EVERY`, once the
//! writer is `PLACEMENT_GRACE` old, so a placement that keeps failing
//! costs one restart per grace at most.

use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::pull::MessagesErrorKind;
use async_nats::jetstream::stream::ClusterInfo;

/// How long a reconnect waits for a delivery to show it harmless before
/// the consumer is asked what it handed out.
pub(super) const VERIFY_AFTER: Duration = Duration::from_secs(1);

/// How often a writer looks at where its consumer is led.
pub(super) const PLACEMENT_EVERY: Duration = Duration::from_secs(5);

/// How old a writer must be before it starts over to move its consumer.
pub(super) const PLACEMENT_GRACE: Duration = Duration::from_secs(10);

/// What happened to the consumer.
#[derive(Debug, Clone)]
pub(super) enum Event {
    /// A command arrived with this consumer sequence.
    Delivered { consumer_seq: u64 },
    /// The message stream reported an error.
    Failed(MessagesErrorKind),
    /// Time passed: `epoch` is the connection's reconnect epoch now.
    Tick { now: Instant, epoch: u64 },
    /// The consumer's answer to "how many did you hand out" (`None`: no
    /// answer, say in a leader election).
    Counted {
        now: Instant,
        delivered: Option<u64>,
    },
    /// Who leads the stream and the consumer (`None`: no answer).
    Located {
        stream: Option<Group>,
        consumer: Option<Group>,
    },
}

/// What placement needs to know of a Raft group (a stream or a consumer).
#[derive(Debug, Clone, Default)]
pub(super) struct Group {
    pub leader: Option<String>,
    /// Every replica is current and online.
    pub current: bool,
}

impl From<&ClusterInfo> for Group {
    fn from(c: &ClusterInfo) -> Self {
        Self {
            leader: c.leader.clone(),
            current: c.replicas.iter().all(|r| r.current && !r.offline),
        }
    }
}

/// What the writer does about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    GoOn,
    /// A pull request could not be sent; the message stream sends it
    /// again. Logged, and the writer goes on.
    Hiccup,
    /// Ask the consumer how many it handed out, then tell (`Counted`).
    Count,
    /// Ask who leads the stream and the consumer, then tell (`Located`).
    Locate,
    StartOver(Reason),
}

/// Why the writer starts over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reason {
    /// Deliveries `from..to` never arrived.
    Skipped { from: u64, to: u64 },
    /// After a reconnect the consumer had handed out more than arrived.
    LostOnReconnect,
    /// The message stream failed.
    Failed(String),
    /// The consumer is led by another node than its stream.
    LedApart { stream: String, consumer: String },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Skipped { from, to } => write!(f, "skipped deliveries {from}..{to}"),
            Self::LostOnReconnect => write!(f, "lost deliveries in a reconnect to NATS"),
            Self::Failed(kind) => write!(f, "failed: {kind}"),
            Self::LedApart { stream, consumer } => write!(
                f,
                "is led by {consumer}, its stream by {stream}; placing it with the stream"
            ),
        }
    }
}

/// The state the checks keep about one consumer.
#[derive(Debug)]
pub(super) struct DeliveryChecks {
    /// The consumer sequence of the last command received.
    received: u64,
    /// The reconnect epoch last seen.
    epoch: u64,
    /// Since when a reconnect waits to be shown harmless.
    unverified_since: Option<Instant>,
    /// When placement is looked at next.
    locate_at: Instant,
}

impl DeliveryChecks {
    /// For a consumer created at `now`, when the connection's reconnect
    /// epoch was `epoch`.
    pub(super) fn new(now: Instant, epoch: u64) -> Self {
        Self {
            received: 0,
            epoch,
            unverified_since: None,
            locate_at: now + PLACEMENT_GRACE,
        }
    }

    pub(super) fn on(&mut self, event: Event) -> Verdict {
        match event {
            Event::Delivered { consumer_seq } => {
                if consumer_seq > self.received + 1 {
                    return Verdict::StartOver(Reason::Skipped {
                        from: self.received + 1,
                        to: consumer_seq,
                    });
                }
                self.received = self.received.max(consumer_seq);
                self.unverified_since = None;
                Verdict::GoOn
            }
            Event::Failed(MessagesErrorKind::Pull) => Verdict::Hiccup,
            Event::Failed(kind) => Verdict::StartOver(Reason::Failed(kind.to_string())),
            Event::Tick { now, epoch } => {
                if epoch != self.epoch {
                    self.epoch = epoch;
                    self.unverified_since.get_or_insert(now);
                }
                if self
                    .unverified_since
                    .is_some_and(|since| now.saturating_duration_since(since) >= VERIFY_AFTER)
                {
                    return Verdict::Count;
                }
                if now >= self.locate_at {
                    self.locate_at = now + PLACEMENT_EVERY;
                    return Verdict::Locate;
                }
                Verdict::GoOn
            }
            Event::Counted { now, delivered } => match delivered {
                Some(handed_out) if handed_out > self.received => {
                    Verdict::StartOver(Reason::LostOnReconnect)
                }
                Some(_) => {
                    self.unverified_since = None;
                    Verdict::GoOn
                }
                // No answer: ask again a second from now. Meanwhile the
                // gap check stops anything newer from passing a loss.
                None => {
                    self.unverified_since = Some(now);
                    Verdict::GoOn
                }
            },
            Event::Located { stream, consumer } => match (stream, consumer) {
                (Some(s), Some(c)) => match apart(&s, &c) {
                    Some((stream, consumer)) => {
                        Verdict::StartOver(Reason::LedApart { stream, consumer })
                    }
                    None => Verdict::GoOn,
                },
                _ => Verdict::GoOn,
            },
        }
    }
}

/// Where a new consumer is moved before anything is pulled from it: to
/// its stream's leader, when it is led elsewhere. `None` when there is
/// nothing to move: the cluster cannot tell, the two are together, or the
/// consumer is no Raft group at all (a single server, where asking for a
/// move would wait out the request's timeout for no answer).
pub(super) fn move_to(stream: Option<&Group>, consumer: Option<&Group>) -> Option<String> {
    let target = stream?.leader.clone()?;
    let consumer = consumer?;
    (consumer.leader.as_ref() != Some(&target)).then_some(target)
}

/// The nodes leading the stream and the consumer when they differ and the
/// consumer can be placed with the stream (every replica of the stream is
/// current); `None` when they agree or the cluster cannot tell now.
fn apart(stream: &Group, consumer: &Group) -> Option<(String, String)> {
    let (s, c) = (stream.leader.as_ref()?, consumer.leader.as_ref()?);
    if s == c || !stream.current {
        return None;
    }
    Some((s.clone(), c.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Times as offsets from a start, in milliseconds.
    enum E {
        Seq(u64),
        Fail(MessagesErrorKind),
        Tick(u64, u64),
        Counted(u64, Option<u64>),
        Located(Option<Group>, Option<Group>),
    }
    use E::*;
    use Verdict::*;

    /// A case: its name, the events, the verdicts expected.
    type Case = (&'static str, Vec<E>, Vec<Verdict>);

    /// Feeds `events` to checks of a consumer created at 0 ms with epoch
    /// 0, and returns the verdicts.
    fn run(events: Vec<E>) -> Vec<Verdict> {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut checks = DeliveryChecks::new(t0, 0);
        events
            .into_iter()
            .map(|e| {
                checks.on(match e {
                    Seq(consumer_seq) => Event::Delivered { consumer_seq },
                    Fail(kind) => Event::Failed(kind),
                    Tick(ms, epoch) => Event::Tick { now: at(ms), epoch },
                    Counted(ms, delivered) => Event::Counted {
                        now: at(ms),
                        delivered,
                    },
                    Located(stream, consumer) => Event::Located { stream, consumer },
                })
            })
            .collect()
    }

    fn check(table: Vec<Case>) {
        for (case, events, expected) in table {
            assert_eq!(run(events), expected, "{case}");
        }
    }

    fn skipped(from: u64, to: u64) -> Verdict {
        StartOver(Reason::Skipped { from, to })
    }

    #[test]
    fn a_gap_in_consumer_sequences_starts_over_before_anything_past_it() {
        check(vec![
            (
                "consecutive",
                vec![Seq(1), Seq(2), Seq(3)],
                vec![GoOn, GoOn, GoOn],
            ),
            ("the first lost", vec![Seq(2)], vec![skipped(1, 2)]),
            (
                "two lost in the middle",
                vec![Seq(1), Seq(2), Seq(5)],
                vec![GoOn, GoOn, skipped(3, 5)],
            ),
            (
                "a repeat is no gap",
                vec![Seq(1), Seq(2), Seq(2), Seq(3)],
                vec![GoOn, GoOn, GoOn, GoOn],
            ),
        ]);
    }

    #[test]
    fn a_reconnect_is_verified_by_the_count_after_a_second_of_silence() {
        check(vec![
            (
                "no reconnect: nothing to ask",
                vec![Tick(250, 0), Tick(1500, 0), Tick(5000, 0)],
                vec![GoOn, GoOn, GoOn],
            ),
            (
                "asked once a second has passed since the reconnect was seen",
                vec![Tick(250, 1), Tick(1000, 1), Tick(1250, 1)],
                vec![GoOn, GoOn, Count],
            ),
            (
                "a delivery meanwhile shows it harmless",
                vec![Tick(250, 1), Seq(1), Tick(1250, 1), Tick(3000, 1)],
                vec![GoOn, GoOn, GoOn, GoOn],
            ),
            (
                "more handed out than arrived: start over",
                vec![Seq(1), Tick(250, 1), Tick(1250, 1), Counted(1300, Some(2))],
                vec![GoOn, GoOn, Count, StartOver(Reason::LostOnReconnect)],
            ),
            (
                "all arrived: go on, and ask no more",
                vec![
                    Seq(1),
                    Tick(250, 1),
                    Tick(1250, 1),
                    Counted(1300, Some(1)),
                    Tick(2500, 1),
                ],
                vec![GoOn, GoOn, Count, GoOn, GoOn],
            ),
            (
                "no answer: asked again a second later",
                vec![
                    Tick(250, 1),
                    Tick(1250, 1),
                    Counted(3250, None),
                    Tick(3500, 1),
                    Tick(4250, 1),
                ],
                vec![GoOn, Count, GoOn, GoOn, Count],
            ),
            (
                "a second reconnect while unverified keeps the first's time",
                vec![Tick(250, 1), Tick(1000, 2), Tick(1250, 2)],
                vec![GoOn, GoOn, Count],
            ),
        ]);
    }

    #[test]
    fn only_a_pull_that_could_not_be_sent_is_ridden_through() {
        use MessagesErrorKind as K;
        let failed = |kind: K| StartOver(Reason::Failed(kind.to_string()));
        check(vec![
            ("a pull request not sent", vec![Fail(K::Pull)], vec![Hiccup]),
            (
                "two heartbeats missed: the consumer's leader changed",
                vec![Fail(K::MissingHeartbeat)],
                vec![failed(K::MissingHeartbeat)],
            ),
            (
                "deleted (a new owner's writer)",
                vec![Fail(K::ConsumerDeleted)],
                vec![failed(K::ConsumerDeleted)],
            ),
            (
                "anything else",
                vec![Fail(K::Other)],
                vec![failed(K::Other)],
            ),
        ]);
    }

    fn group(leader: &str, current: bool) -> Option<Group> {
        Some(Group {
            leader: Some(leader.into()),
            current,
        })
    }

    #[test]
    fn placement_is_looked_at_after_the_grace_then_at_its_cadence() {
        check(vec![
            (
                "not before the grace",
                vec![Tick(5000, 0), Tick(9750, 0), Tick(10_000, 0)],
                vec![GoOn, GoOn, Locate],
            ),
            (
                "then every PLACEMENT_EVERY",
                vec![
                    Tick(10_000, 0),
                    Tick(10_250, 0),
                    Tick(14_750, 0),
                    Tick(15_000, 0),
                ],
                vec![Locate, GoOn, GoOn, Locate],
            ),
            (
                "a reconnect's count comes first",
                vec![
                    Tick(9500, 1),
                    Tick(10_500, 1),
                    Counted(10_500, Some(0)),
                    Tick(10_750, 1),
                ],
                vec![GoOn, Count, GoOn, Locate],
            ),
        ]);
    }

    #[test]
    fn a_new_consumer_is_moved_to_its_stream_leader_only_in_a_cluster() {
        type Placement = (
            &'static str,
            Option<Group>,
            Option<Group>,
            Option<&'static str>,
        );
        let table: Vec<Placement> = vec![
            (
                "led elsewhere",
                group("n1", true),
                group("n3", true),
                Some("n1"),
            ),
            (
                "not yet led",
                group("n1", true),
                Some(Group::default()),
                Some("n1"),
            ),
            ("together", group("n1", true), group("n1", true), None),
            (
                "one server: no consumer group",
                group("n1", true),
                None,
                None,
            ),
            (
                "the stream's leader unknown",
                Some(Group::default()),
                group("n3", true),
                None,
            ),
            ("no answer", None, group("n3", true), None),
        ];
        for (case, stream, consumer, expected) in table {
            assert_eq!(
                move_to(stream.as_ref(), consumer.as_ref()).as_deref(),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn a_group_is_current_only_when_every_replica_is() {
        use async_nats::jetstream::stream::PeerInfo;
        let peer = |current, offline| PeerInfo {
            name: "n9".into(),
            current,
            offline,
            ..Default::default()
        };
        let info = |replicas| ClusterInfo {
            leader: Some("n1".into()),
            replicas,
            ..Default::default()
        };
        assert!(Group::from(&info(vec![peer(true, false)])).current);
        assert!(!Group::from(&info(vec![peer(true, false), peer(false, false)])).current);
        assert!(!Group::from(&info(vec![peer(true, true)])).current);
        assert_eq!(Group::from(&info(vec![])).leader.as_deref(), Some("n1"));
    }

    #[test]
    fn a_consumer_led_apart_from_its_stream_is_moved_only_onto_a_current_group() {
        let apart = |s: &str, c: &str| {
            StartOver(Reason::LedApart {
                stream: s.into(),
                consumer: c.into(),
            })
        };
        check(vec![
            (
                "led apart",
                vec![Located(group("n1", true), group("n3", true))],
                vec![apart("n1", "n3")],
            ),
            (
                "led together",
                vec![Located(group("n1", true), group("n1", true))],
                vec![GoOn],
            ),
            (
                "a stream replica catching up: the move could not land; wait",
                vec![Located(group("n1", false), group("n3", true))],
                vec![GoOn],
            ),
            (
                "no leader known (an election): nothing to compare",
                vec![Located(Some(Group::default()), group("n3", true))],
                vec![GoOn],
            ),
            (
                "no answer",
                vec![Located(None, group("n3", true))],
                vec![GoOn],
            ),
        ]);
    }
}
