//! The sends of a connection, event by event: every loss the cluster
//! tests found, as a table of what happens and what the connection must
//! do about it.

use super::*;
use switchboard_protocol::SendAck;

const LIMITS: SendLimits = SendLimits {
    max_waiting: 3,
    max_unstored_bytes: 100,
    overdue: Duration::from_secs(5),
    give_up: Duration::from_secs(30),
};

/// One thing that happens to a connection's sends. Sends are named by
/// their `client_msg_id`; times are seconds since the start.
#[derive(Clone, Copy)]
enum Step {
    /// Accepted at this connection epoch, with this many bytes.
    Accept(&'static str, usize, u64),
    /// JetStream's answer (its pub-ack) to the send's latest copy.
    InStream(&'static str, PubAck),
    Failed(&'static str),
    /// The writer's `ack` or refusal (from the hub).
    WriterAnswer(&'static str),
    /// What the store said of it.
    Stored(&'static str),
    Refused(&'static str),
    Nothing(&'static str),
    Reconnect(u64),
    At(u64),
    Drain,
}

/// What the connection does, in short: `ack m1`, `error m1 rate_limited`,
/// `lookup m1 m2`, `answered`, or `refused <code>` for a send not
/// accepted.
fn effects(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Write(frame) => match frame.as_ref() {
                ServerFrame::Ack(SendAck { client_msg_id, .. }) => format!("ack {client_msg_id}"),
                ServerFrame::Error {
                    code,
                    client_msg_id,
                    ..
                } => format!(
                    "error {} {}",
                    client_msg_id.as_deref().unwrap_or("-"),
                    code.as_str()
                ),
                other => format!("write {other:?}"),
            },
            Action::LookUp(sends) => {
                let mut ids: Vec<&str> = sends.iter().map(|(_, id)| id.as_str()).collect();
                ids.sort_unstable();
                format!("lookup {}", ids.join(" "))
            }
            Action::Answered(_) => "answered".into(),
        })
        .collect()
}

fn message(id: &str) -> Message {
    Message::plain(
        switchboard_protocol::MessageId::from_u64(7),
        ConversationId::new("c").unwrap(),
        1,
        switchboard_protocol::UserId::new("u").unwrap(),
        switchboard_protocol::DeviceId::new("d").unwrap(),
        ClientMsgId::new(id).unwrap(),
        None,
        switchboard_protocol::Timestamp::from_unix_ms(1),
    )
}

/// Runs `steps`, each with the effects it must have, and checks whether
/// every send is settled at the end.
fn check(steps: &[(Step, &[&str])], settled: bool) {
    let start = Instant::now();
    let mut now = start;
    let mut sends = Sends::new(LIMITS);
    let mut tickets: HashMap<&str, Ticket> = HashMap::new();
    let id = |s: &str| ClientMsgId::new(s).unwrap();
    for (i, (step, expected)) in steps.iter().enumerate() {
        let got = match *step {
            Step::Accept(m, bytes, epoch) => {
                match sends.accept(
                    &id(m),
                    &ConversationId::new("c").unwrap(),
                    bytes,
                    epoch,
                    now,
                ) {
                    Ok(ticket) => {
                        tickets.insert(m, ticket);
                        Vec::new()
                    }
                    Err(refusal) => vec![format!("refused {}", refusal.code.as_str())],
                }
            }
            Step::InStream(m, ack) => effects(&sends.pub_acked(&id(m), tickets[m], ack)),
            Step::Failed(m) => {
                effects(&sends.publish_failed(&id(m), tickets[m], "no pub-ack", now))
            }
            // The connection writes the writer's frame itself.
            Step::WriterAnswer(m) => effects(&sends.answered(&id(m), now)),
            Step::Stored(m) => {
                effects(&sends.found(&id(m), Found::Stored(Box::new(message(m))), now))
            }
            Step::Refused(m) => effects(&sends.found(
                &id(m),
                Found::Refused {
                    code: ErrorCode::RejectedByPolicy,
                    message: "no".into(),
                },
                now,
            )),
            Step::Nothing(m) => effects(&sends.found(&id(m), Found::Nothing, now)),
            Step::Reconnect(epoch) => effects(&sends.reconnected(epoch)),
            Step::At(secs) => {
                now = start + Duration::from_secs(secs);
                effects(&sends.tick(now))
            }
            Step::Drain => {
                sends.drain();
                Vec::new()
            }
        };
        assert_eq!(got, *expected, "step {i}");
    }
    assert_eq!(sends.is_settled(), settled, "settled at the end");
}

use Step::*;

#[test]
fn a_send_is_answered_by_its_writer() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::New), &[]),
            (WriterAnswer("m1"), &["answered"]),
            // A second answer (a resend's) settles nothing more.
            (WriterAnswer("m1"), &[]),
        ],
        true,
    );
}

/// The writer's refusal is an answer like its `ack`.
#[test]
fn a_refusal_settles_the_send() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::New), &[]),
            (WriterAnswer("m1"), &["answered"]),
        ],
        true,
    );
}

#[test]
fn a_failed_publish_is_answered_unavailable() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (Failed("m1"), &["answered", "error m1 unavailable"]),
        ],
        true,
    );
}

#[test]
fn a_duplicate_is_answered_from_the_store() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::Duplicate), &["lookup m1"]),
            (Stored("m1"), &["answered", "ack m1"]),
        ],
        true,
    );
}

#[test]
fn a_duplicate_of_a_refused_send_gets_the_refusal() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::Duplicate), &["lookup m1"]),
            (Refused("m1"), &["answered", "error m1 rejected_by_policy"]),
        ],
        true,
    );
}

/// The original is still on its way: its writer answers; if that answer
/// is lost, the send is looked up again once overdue.
#[test]
fn a_duplicate_with_a_lost_answer_is_looked_up_again_when_overdue() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::Duplicate), &["lookup m1"]),
            (Nothing("m1"), &[]),
            (At(4), &[]),
            (At(5), &["lookup m1"]),
            (Stored("m1"), &["answered", "ack m1"]),
        ],
        true,
    );
}

/// NATS reconnects after the pub-ack: the writer's answer may have been
/// published while this gateway was away, so the send is looked up.
#[test]
fn a_reconnect_after_the_pub_ack_looks_the_send_up() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::New), &[]),
            (Accept("m2", 10, 2), &[]),
            (InStream("m2", PubAck::New), &[]),
            // Only sends accepted before the new connection.
            (Reconnect(2), &["lookup m1"]),
            (Stored("m1"), &["answered", "ack m1"]),
            (WriterAnswer("m2"), &["answered"]),
        ],
        true,
    );
}

/// NATS reconnects before the pub-ack: the send is published again
/// (`ingest.rs`) and its copy's pub-ack says duplicate or new; the store
/// answers if the writer's answer is gone.
#[test]
fn a_reconnect_before_the_pub_ack_then_the_store_answers() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (Reconnect(2), &["lookup m1"]),
            (Nothing("m1"), &[]),
            (InStream("m1", PubAck::Duplicate), &["lookup m1"]),
            (Stored("m1"), &["answered", "ack m1"]),
        ],
        true,
    );
}

/// The writer's answer and the store's may both come: one settles the
/// send, and a store answer after the writer's writes nothing more.
#[test]
fn the_store_never_answers_a_send_twice() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::New), &[]),
            (Reconnect(2), &["lookup m1"]),
            (WriterAnswer("m1"), &["answered"]),
            (Stored("m1"), &[]),
        ],
        true,
    );
}

/// A client that sends again before the answer: the copy is published,
/// answered with the original, and counted once.
#[test]
fn a_copy_in_flight_is_answered_with_its_original() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (Accept("m1", 10, 1), &[]),
            // The copy's pub-ack (its ticket is the latest) changes nothing.
            (InStream("m1", PubAck::Duplicate), &[]),
            (WriterAnswer("m1"), &["answered"]),
        ],
        true,
    );
}

#[test]
fn a_drain_waits_for_every_send_in_flight() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (Accept("m2", 10, 1), &[]),
            (InStream("m1", PubAck::New), &[]),
            (Drain, &[]),
            (Accept("m3", 10, 1), &["refused unavailable"]),
            (WriterAnswer("m1"), &["answered"]),
            (InStream("m2", PubAck::Duplicate), &["lookup m2"]),
        ],
        false,
    );
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (Drain, &[]),
            (InStream("m1", PubAck::New), &[]),
            (WriterAnswer("m1"), &["answered"]),
        ],
        true,
    );
}

/// An answer that never comes, from the writer or the store, is given up
/// on and answered `unavailable`: the drain ends, and the client's resend
/// will be answered.
#[test]
fn a_send_nobody_answers_is_given_up_on() {
    check(
        &[
            (Accept("m1", 10, 1), &[]),
            (InStream("m1", PubAck::New), &[]),
            (At(5), &["lookup m1"]),
            (Nothing("m1"), &[]),
            (At(10), &["lookup m1"]),
            (Nothing("m1"), &[]),
            (At(30), &["error m1 unavailable"]),
        ],
        true,
    );
}

#[test]
fn at_most_max_waiting_sends_wait() {
    check(
        &[
            (Accept("m1", 1, 1), &[]),
            (Accept("m2", 1, 1), &[]),
            (Accept("m3", 1, 1), &[]),
            (Accept("m4", 1, 1), &["refused rate_limited"]),
            (InStream("m1", PubAck::New), &[]),
            (WriterAnswer("m1"), &["answered"]),
            (Accept("m4", 1, 1), &[]),
        ],
        false,
    );
}

/// Bytes wait for JetStream, not for the writer: a send's bytes are back
/// once it is stored. One send is always taken, however large.
#[test]
fn at_most_max_unstored_bytes_wait_for_the_backbone() {
    check(
        &[
            (Accept("big", 150, 1), &[]),
            (Accept("m2", 1, 1), &["refused rate_limited"]),
            (InStream("big", PubAck::New), &[]),
            (Accept("m2", 60, 1), &[]),
            (Accept("m3", 40, 1), &[]),
            (Accept("m4", 1, 1), &["refused rate_limited"]),
        ],
        false,
    );
}

#[test]
fn the_next_tick_is_the_earliest_thing_to_do() {
    let start = Instant::now();
    let mut sends = Sends::new(LIMITS);
    assert_eq!(sends.next_tick(), None);
    let (c, m) = (
        ConversationId::new("c").unwrap(),
        ClientMsgId::new("m").unwrap(),
    );
    let ticket = sends.accept(&m, &c, 1, 1, start).unwrap();
    // Unstored: only giving up is due.
    assert_eq!(sends.next_tick(), Some(start + LIMITS.give_up));
    sends.pub_acked(&m, ticket, PubAck::New);
    assert_eq!(sends.next_tick(), Some(start + LIMITS.overdue));
}

#[test]
fn a_send_stored_other_than_sent_is_answered_with_what_was_stored() {
    let start = Instant::now();
    let mut sends = Sends::new(LIMITS);
    let (c, plain, masked) = (
        ConversationId::new("c").unwrap(),
        ClientMsgId::new("plain").unwrap(),
        ClientMsgId::new("masked").unwrap(),
    );
    let stored = Content::Text {
        text: "well ****".into(),
    };
    for m in [&plain, &masked] {
        let ticket = sends.accept(m, &c, 1, 1, start).unwrap();
        sends.pub_acked(m, ticket, PubAck::New);
    }
    sends.show_stored(&masked, stored.clone());
    assert_eq!(sends.stored_content(&plain), None);
    assert_eq!(sends.stored_content(&masked), Some(stored.clone()));

    // Answered from the store: the rewritten one's ack carries it.
    let ack_content = |actions: Vec<Action>| {
        actions.into_iter().find_map(|a| match a {
            Action::Write(frame) => match *frame {
                ServerFrame::Ack(SendAck { content, .. }) => Some(content),
                _ => None,
            },
            _ => None,
        })
    };
    let mut found = |id: &ClientMsgId| {
        let mut message = message(id.as_str());
        message.content = Some(stored.clone());
        ack_content(sends.found(id, Found::Stored(Box::new(message)), start))
    };
    assert_eq!(found(&plain), Some(None));
    assert_eq!(found(&masked), Some(Some(stored.clone())));
}
