//! The sequencer against a real embedded store.

use std::sync::atomic::{AtomicU64, Ordering};

use switchboard_nats::envelope::UpdateCommand;
use switchboard_protocol::snowflake::SnowflakeGenerator;
use switchboard_protocol::{ConversationId, TenantId};
use switchboard_store::StoreError;
use switchboard_store::embedded::{EmbeddedConfig, EmbeddedStore};

use super::*;

struct Counter(std::sync::Mutex<SnowflakeGenerator>, AtomicU64);

impl IdSource for Counter {
    fn next_id(&self) -> Result<MessageId, switchboard_nats::BackboneError> {
        let ms = self.1.fetch_add(1, Ordering::Relaxed);
        Ok(self.0.lock().unwrap().next_id(ms))
    }
}

fn ids() -> Counter {
    // Ids stamped from now on, as the real generator's are: the edit
    // window is measured against the clock.
    let now = Timestamp::now().unix_ms() as u64;
    Counter(
        std::sync::Mutex::new(SnowflakeGenerator::new(1).unwrap()),
        AtomicU64::new(now),
    )
}

fn u(s: &str) -> UserId {
    UserId::new(s).unwrap()
}

fn create(conv: &str, kind: ConversationKind, members: &[&str], id: u64) -> Incoming {
    Incoming {
        command: Command::CreateConversation(CreateConversationCommand {
            command_id: MessageId::from_u64(id),
            tenant: TenantId::new("t").unwrap(),
            conversation_id: ConversationId::new(conv).unwrap(),
            kind,
            title: None,
            members: members.iter().map(|m| u(m)).collect(),
            actor: u(members[0]),
            device: DeviceId::default_device(),
            actor_is_admin: false,
            at: Timestamp::from_unix_ms(1),
        }),
        reply_to: Some("reply".into()),
        span: tracing::Span::none(),
    }
}

fn send(conv: &str, sender: &str, client_msg_id: &str) -> Incoming {
    Incoming {
        command: Command::Send(SendCommand {
            tenant: TenantId::new("t").unwrap(),
            conversation_id: ConversationId::new(conv).unwrap(),
            sender: u(sender),
            device: DeviceId::default_device(),
            client_msg_id: ClientMsgId::new(client_msg_id).unwrap(),
            content: Content::Text { text: "hi".into() },
            received_at: Timestamp::from_unix_ms(1),
            options: Default::default(),
        }),
        reply_to: None,
        span: tracing::Span::none(),
    }
}

fn members(conv: &str, actor: &str, users: &[&str], id: u64, add: bool) -> Incoming {
    let c = MembersCommand {
        command_id: MessageId::from_u64(id),
        tenant: TenantId::new("t").unwrap(),
        conversation_id: ConversationId::new(conv).unwrap(),
        users: users.iter().map(|m| u(m)).collect(),
        actor: u(actor),
        device: DeviceId::default_device(),
        actor_is_admin: false,
        at: Timestamp::from_unix_ms(2),
    };
    Incoming {
        command: if add {
            Command::AddMembers(c)
        } else {
            Command::RemoveMembers(c)
        },
        reply_to: Some("reply".into()),
        span: tracing::Span::none(),
    }
}

/// Plans and commits one batch; returns the outcomes.
async fn run(
    seq: &mut Sequencer,
    store: &EmbeddedStore,
    ids: &Counter,
    batch: &[Incoming],
) -> Vec<Outcome> {
    let mut plan = seq
        .plan(store, ids, batch, true, Timestamp::now())
        .await
        .unwrap();
    let mutations = std::mem::take(&mut plan.mutations);
    store.commit(mutations).await.unwrap();
    seq.committed(&mut plan);
    plan.outcomes
}

fn delivered(o: &Outcome) -> (u64, Vec<&str>) {
    match o {
        Outcome::Deliver {
            message,
            recipients,
            ..
        } => (message.seq, recipients.iter().map(|r| r.as_str()).collect()),
        other => panic!("expected a delivery, got {other:?}"),
    }
}

/// The `seq` of a resend's answer, which goes to its sender alone.
fn answered(o: &Outcome) -> u64 {
    match o {
        Outcome::Answer { message, .. } => message.seq,
        other => panic!("expected a resend's answer, got {other:?}"),
    }
}

fn code(o: &Outcome) -> ErrorCode {
    match o {
        Outcome::Reject { rejection, .. } => rejection.code,
        Outcome::Reply {
            reply: CommandReply::Refused { code, .. },
            ..
        } => *code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn open() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir.path())).unwrap();
    (dir, store)
}

#[tokio::test]
async fn sequences_sends_gap_free_and_answers_retries_with_the_original() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, Policies::default());
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("c", ConversationKind::Group, &["a", "b"], 1),
            send("c", "a", "m1"),
            send("c", "b", "m2"),
            send("c", "a", "m1"),
        ],
    )
    .await;
    assert!(matches!(
        out[0],
        Outcome::Reply {
            reply: CommandReply::Done { created: true, .. },
            ..
        }
    ));
    assert_eq!(delivered(&out[1]), (1, vec!["a", "b"]));
    assert_eq!(delivered(&out[2]), (2, vec!["a", "b"]));
    assert_eq!(
        answered(&out[3]),
        1,
        "a retry in the same batch is the original, for its sender only"
    );
    // A retry in a later batch (say, after the dedupe window) too.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[send("c", "a", "m1"), send("c", "a", "m3")],
    )
    .await;
    assert_eq!(answered(&out[0]), 1);
    assert_eq!(delivered(&out[1]).0, 3);
    // A fresh sequencer (a new owner) continues from the store.
    let mut fresh = Sequencer::new(1000, Policies::default());
    let out = run(&mut fresh, &store, &ids, &[send("c", "b", "m4")]).await;
    assert_eq!(delivered(&out[0]).0, 4);
}

#[tokio::test]
async fn refuses_non_members_and_unknown_conversations() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, Policies::default());
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            send("nope", "a", "m1"),
            create("c", ConversationKind::Direct, &["a", "b"], 1),
            send("c", "eve", "m1"),
        ],
    )
    .await;
    assert_eq!(code(&out[0]), ErrorCode::NotFound);
    assert_eq!(code(&out[2]), ErrorCode::NotAMember);
    let state = switchboard_store::Reads::sequencer_states(
        &store,
        vec![ConversationKey {
            tenant: TenantId::new("t").unwrap(),
            conversation_id: ConversationId::new("c").unwrap(),
        }],
    )
    .await
    .unwrap();
    assert_eq!(state[0].as_ref().unwrap().last_seq, 0, "nothing was stored");
}

#[tokio::test]
async fn membership_changes_are_sequenced_with_the_messages() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, Policies::default());
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("g", ConversationKind::Group, &["a", "b"], 1),
            send("g", "c", "early"),
            members("g", "a", &["c"], 2, true),
            send("g", "c", "late"),
            members("g", "b", &["a"], 3, false),
            members("g", "a", &["b"], 4, false),
            send("g", "b", "after"),
        ],
    )
    .await;
    assert_eq!(code(&out[1]), ErrorCode::NotAMember, "not yet a member");
    assert_eq!(
        delivered(&out[2]),
        (1, vec!["a", "b", "c"]),
        "system message"
    );
    assert_eq!(delivered(&out[4]), (2, vec!["a", "b", "c"]));
    assert_eq!(code(&out[5]), ErrorCode::Forbidden, "b did not create g");
    assert_eq!(
        delivered(&out[6]),
        (3, vec!["a", "b", "c"]),
        "the removed hear of it"
    );
    assert_eq!(code(&out[8]), ErrorCode::NotAMember, "b was removed");
    // The same command again (a redelivery) changes nothing.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[members("g", "a", &["c"], 2, true)],
    )
    .await;
    assert!(matches!(
        out[0],
        Outcome::Reply {
            reply: CommandReply::Done { created: false, .. },
            ..
        }
    ));
    // Direct conversations keep their two members.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("d", ConversationKind::Direct, &["a", "b"], 5),
            members("d", "a", &["c"], 6, true),
        ],
    )
    .await;
    assert_eq!(code(&out[1]), ErrorCode::Conflict);
}

#[tokio::test]
async fn a_stale_writer_is_refused_by_the_store() {
    let (_dir, store) = open();
    let ids = ids();
    let mut owner = Sequencer::new(1000, Policies::default());
    run(
        &mut owner,
        &store,
        &ids,
        &[
            create("c", ConversationKind::Group, &["a"], 1),
            send("c", "a", "m1"),
        ],
    )
    .await;
    // A zombie that cached the state at seq 1, while the new owner writes seq 2.
    let mut zombie = Sequencer::new(1000, Policies::default());
    run(&mut zombie, &store, &ids, &[send("c", "a", "m2")]).await;
    let mut plan = owner
        .plan(
            &store,
            &ids,
            &[send("c", "a", "m3")],
            true,
            Timestamp::now(),
        )
        .await
        .unwrap();
    let refused = store.commit(std::mem::take(&mut plan.mutations)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    owner.forget();
    let out = run(&mut owner, &store, &ids, &[send("c", "a", "m3")]).await;
    assert_eq!(delivered(&out[0]).0, 3);
}

#[tokio::test]
async fn an_unchecked_retry_is_caught_by_the_store_and_answered_when_checked() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, Policies::default());
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("c", ConversationKind::Group, &["a"], 1),
            send("c", "a", "m1"),
        ],
    )
    .await;
    let (original, _) = delivered(&out[1]);
    // A retry beyond the dedupe window, planned without the read.
    let mut plan = seq
        .plan(
            &store,
            &ids,
            &[send("c", "a", "m1")],
            false,
            Timestamp::now(),
        )
        .await
        .unwrap();
    let refused = store.commit(std::mem::take(&mut plan.mutations)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    seq.forget();
    let out = run(&mut seq, &store, &ids, &[send("c", "a", "m1")]).await;
    assert_eq!(answered(&out[0]), original);
}

fn update(
    conv: &str,
    actor: &str,
    message_id: MessageId,
    content: Option<&str>,
    id: u64,
) -> Incoming {
    let c = UpdateCommand {
        command_id: MessageId::from_u64(id),
        tenant: TenantId::new("t").unwrap(),
        conversation_id: ConversationId::new(conv).unwrap(),
        message_id,
        actor: u(actor),
        device: DeviceId::default_device(),
        actor_is_admin: false,
        content: content.map(|t| Content::Text { text: t.into() }),
        custom: None,
    };
    Incoming {
        command: if content.is_some() {
            Command::Edit(c)
        } else {
            Command::Delete(c)
        },
        reply_to: None,
        span: tracing::Span::none(),
    }
}

fn updated(o: &Outcome) -> &Message {
    match o {
        Outcome::Update { message, .. } => message,
        other => panic!("expected an update, got {other:?}"),
    }
}

#[tokio::test]
async fn edits_and_deletes_are_sequenced_and_policed() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, Policies::default());
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("c", ConversationKind::Group, &["a", "b"], 1),
            send("c", "a", "m1"),
            send("c", "a", "m2"),
        ],
    )
    .await;
    let (m1, m2) = match (&out[1], &out[2]) {
        (Outcome::Deliver { message: x, .. }, Outcome::Deliver { message: y, .. }) => {
            (x.message_id, y.message_id)
        }
        other => panic!("{other:?}"),
    };
    // An edit then a delete: both happen, in that order.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            update("c", "a", m1, Some("fixed"), 10),
            update("c", "a", m1, None, 11),
        ],
    )
    .await;
    assert_eq!(
        updated(&out[0]).content,
        Some(Content::Text {
            text: "fixed".into()
        })
    );
    assert!(updated(&out[1]).deleted_at.is_some() && updated(&out[1]).content.is_none());
    // A delete then an edit: the edit is refused; the end is the same.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            update("c", "a", m2, None, 12),
            update("c", "a", m2, Some("too late"), 13),
        ],
    )
    .await;
    assert!(updated(&out[0]).deleted_at.is_some());
    assert_eq!(code(&out[1]), ErrorCode::Conflict);
    // Only the sender edits; unknown messages are not found.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            send("c", "b", "m3"),
            update("c", "a", MessageId::from_u64(42), Some("?"), 14),
        ],
    )
    .await;
    let m3 = match &out[0] {
        Outcome::Deliver { message, .. } => message.message_id,
        other => panic!("{other:?}"),
    };
    assert_eq!(code(&out[1]), ErrorCode::NotFound);
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[update("c", "a", m3, Some("not mine"), 15)],
    )
    .await;
    assert_eq!(code(&out[0]), ErrorCode::Forbidden);
}

#[tokio::test]
async fn every_outcome_names_the_command_it_comes_from() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, Policies::default());
    let batch = [
        create("c", ConversationKind::Group, &["a", "b"], 1),
        // Refused: not a member.
        send("c", "x", "m0"),
        send("c", "a", "m1"),
    ];
    let plan = seq
        .plan(&store, &ids, &batch, true, Timestamp::now())
        .await
        .unwrap();
    // Outcomes carry the trace of their command (writer/consume.rs), so each must
    // name the right one however many a command makes.
    assert_eq!(plan.outcomes.len(), plan.caused_by.len());
    let kinds: Vec<(&str, usize)> = plan
        .outcomes
        .iter()
        .zip(&plan.caused_by)
        .map(|(o, &i)| {
            let kind = match o {
                Outcome::Reply { .. } => "reply",
                Outcome::Reject { .. } => "reject",
                Outcome::Deliver { .. } => "deliver",
                Outcome::Answer { .. } => "answer",
                Outcome::Update { .. } => "update",
                Outcome::Listen { .. } => "listen",
                Outcome::Event { .. } => "event",
                Outcome::Reported { .. } => "reported",
                Outcome::ReactionPush { .. } => "reaction push",
                Outcome::Audited { .. } => "audited",
                Outcome::Unfurl(_) => "unfurl",
            };
            (kind, i)
        })
        .collect();
    assert_eq!(kinds.last(), Some(&("deliver", 2)), "{kinds:?}");
    assert!(kinds.contains(&("reject", 1)), "{kinds:?}");
    assert!(kinds.contains(&("reply", 0)), "{kinds:?}");
    assert!(
        kinds.windows(2).all(|w| w[0].1 <= w[1].1),
        "in batch order: {kinds:?}"
    );
}

/// Policies with a limit of `n` unsolicited groups a day.
fn consent_limit(n: u32) -> Policies {
    Policies {
        consent: crate::policy::ConsentPolicy {
            unsolicited_groups_per_day: n,
        },
        ..Policies::default()
    }
}

/// The replies of a batch's REST commands, in order.
fn replies(out: &[Outcome]) -> Vec<&Outcome> {
    out.iter()
        .filter(|o| matches!(o, Outcome::Reply { .. }))
        .collect()
}

fn created(o: &Outcome) -> bool {
    matches!(
        o,
        Outcome::Reply {
            reply: CommandReply::Done { created: true, .. },
            ..
        }
    )
}

#[tokio::test]
async fn strangers_put_a_user_into_at_most_the_limit_of_groups() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, consent_limit(2));
    // At the limit, across batches and within one; then just past it.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[create("g1", ConversationKind::Group, &["s", "v"], 1)],
    )
    .await;
    assert!(created(replies(&out)[0]));
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("g2", ConversationKind::Group, &["s", "v"], 2),
            create("g3", ConversationKind::Group, &["s", "v", "w"], 3),
            create("g4", ConversationKind::Group, &["s", "w"], 4),
        ],
    )
    .await;
    let r = replies(&out);
    assert!(created(r[0]));
    assert_eq!(code(r[1]), ErrorCode::Forbidden, "the whole create goes");
    assert!(created(r[2]), "w is still free");
    // Adding to a group that exists counts the same way.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[members("g4", "s", &["v"], 5, true)],
    )
    .await;
    assert_eq!(code(replies(&out)[0]), ErrorCode::Forbidden);
    // Direct conversations are not groups.
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[create("d", ConversationKind::Direct, &["s", "v"], 6)],
    )
    .await;
    assert!(created(replies(&out)[0]));
    // A tenant admin places users where they belong.
    let mut admin = members("g4", "boss", &["v"], 7, true);
    if let Command::AddMembers(c) = &mut admin.command {
        c.actor_is_admin = true;
    }
    let out = run(&mut seq, &store, &ids, &[admin]).await;
    assert!(created(replies(&out)[0]));
    // So does one who creates a group with them (as the docs always said).
    let mut admin = create("g5", ConversationKind::Group, &["boss", "v"], 8);
    if let Command::CreateConversation(c) = &mut admin.command {
        c.actor_is_admin = true;
    }
    let out = run(&mut seq, &store, &ids, &[admin]).await;
    assert!(
        created(replies(&out)[0]),
        "an admin's create is not limited"
    );
}

#[tokio::test]
async fn people_the_user_knows_are_not_limited() {
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, consent_limit(1));
    run(
        &mut seq,
        &store,
        &ids,
        &[
            // v opened a conversation with f; v wrote in one of s's groups.
            create("d", ConversationKind::Direct, &["v", "f"], 1),
            create("g1", ConversationKind::Group, &["s", "v"], 2),
            send("g1", "v", "hi"),
        ],
    )
    .await;
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("g2", ConversationKind::Group, &["f", "v"], 3),
            create("g3", ConversationKind::Group, &["f", "v"], 4),
            create("g4", ConversationKind::Group, &["s", "v"], 5),
            create("g5", ConversationKind::Group, &["x", "v"], 6),
        ],
    )
    .await;
    let r = replies(&out);
    assert!(r[..3].iter().all(|o| created(o)), "{r:?}");
    assert_eq!(code(r[3]), ErrorCode::Forbidden, "x is a stranger, past 1");
}

/// Two partitions' writers plan adds of the same user at once: the store
/// refuses the second commit, and its batch planned again is refused.
#[tokio::test]
async fn the_store_catches_adds_another_writer_committed_meanwhile() {
    let (_dir, store) = open();
    let ids = ids();
    let mut one = Sequencer::new(1000, consent_limit(1));
    let mut two = Sequencer::new(1000, consent_limit(1));
    let first = [create("g1", ConversationKind::Group, &["s", "v"], 1)];
    let second = [create("g2", ConversationKind::Group, &["t", "v"], 2)];
    let mut a = one
        .plan(&store, &ids, &first, true, Timestamp::now())
        .await
        .unwrap();
    let mut b = two
        .plan(&store, &ids, &second, true, Timestamp::now())
        .await
        .unwrap();
    store
        .commit(std::mem::take(&mut a.mutations))
        .await
        .unwrap();
    let refused = store.commit(std::mem::take(&mut b.mutations)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    two.forget();
    let out = run(&mut two, &store, &ids, &second).await;
    assert_eq!(code(replies(&out)[0]), ErrorCode::Forbidden);
}

/// A shadow-banned sender's message (v1.3) is stored flagged and goes to
/// its sender alone, with no push; others cannot react to it; once the
/// shadow ban is lifted their next message goes to everyone.
#[tokio::test]
async fn a_shadow_banned_senders_message_is_theirs_alone() {
    use switchboard_nats::records::bans::BanKind;
    use switchboard_protocol::moderation::TenantBan;
    let (_dir, store) = open();
    let ids = ids();
    let policies = Policies::default();
    let bans = policies.bans.clone();
    let tenant = TenantId::new("t").unwrap();
    bans.set(
        BanKind::Shadow,
        &tenant,
        &u("a"),
        Some(TenantBan {
            user_id: u("a"),
            by: u("root"),
            banned_at: Timestamp::from_unix_ms(1),
            until: None,
            reason: None,
        }),
    );
    let mut seq = Sequencer::new(1000, policies);
    let out = run(
        &mut seq,
        &store,
        &ids,
        &[
            create("c", ConversationKind::Group, &["a", "b"], 1),
            send("c", "a", "m1"),
            send("c", "b", "m2"),
        ],
    )
    .await;
    let Outcome::Deliver {
        message, push_to, ..
    } = &out[1]
    else {
        panic!("{:?}", out[1]);
    };
    assert!(message.shadow);
    assert!(push_to.is_empty());
    assert_eq!(delivered(&out[1]), (1, vec!["a"]));
    assert_eq!(delivered(&out[2]), (2, vec!["a", "b"]));
    let hidden = message.message_id;

    let react = |by: &str| Incoming {
        command: Command::React(switchboard_nats::envelope::ReactCommand {
            by: switchboard_nats::envelope::Actor {
                command_id: MessageId::from_u64(99),
                tenant: tenant.clone(),
                conversation_id: ConversationId::new("c").unwrap(),
                actor: u(by),
                device: DeviceId::default_device(),
                actor_is_admin: false,
                at: Timestamp::from_unix_ms(3),
            },
            message_id: hidden,
            emoji: "👍".into(),
            action: switchboard_protocol::ReactAction::Add,
        }),
        reply_to: None,
        span: tracing::Span::none(),
    };
    let out = run(&mut seq, &store, &ids, &[react("b")]).await;
    assert_eq!(code(&out[0]), ErrorCode::NotFound);

    bans.set(BanKind::Shadow, &tenant, &u("a"), None);
    let out = run(&mut seq, &store, &ids, &[send("c", "a", "m3")]).await;
    assert_eq!(delivered(&out[0]), (3, vec!["a", "b"]));
}

/// Mutes and freezing (v1.3) are audited by the writer once made, under
/// the command's id; a replayed command that finds its change made
/// records it again under the same id (JetStream keeps one), and a
/// change that changes nothing records nothing.
#[tokio::test]
async fn mutes_and_freezing_are_audited_once_made_and_again_when_replayed() {
    use switchboard_nats::envelope::{Actor, BanCommand, PolicyCommand};
    use switchboard_protocol::moderation::AuditAction;
    let (_dir, store) = open();
    let ids = ids();
    let mut seq = Sequencer::new(1000, Policies::default());
    let by = |id: u64| Actor {
        command_id: MessageId::from_u64(id),
        tenant: TenantId::new("t").unwrap(),
        conversation_id: ConversationId::new("c").unwrap(),
        actor: u("a"),
        device: DeviceId::default_device(),
        actor_is_admin: false,
        at: Timestamp::from_unix_ms(5),
    };
    let incoming = |command: Command| Incoming {
        command,
        reply_to: Some("reply".into()),
        span: tracing::Span::none(),
    };
    let mute = |id: u64, on: bool| {
        let c = BanCommand {
            by: by(id),
            user: u("b"),
            until: None,
        };
        incoming(if on {
            Command::Mute(c)
        } else {
            Command::Unmute(c)
        })
    };
    let freeze = |id: u64| {
        incoming(Command::SetPolicy(PolicyCommand {
            by: by(id),
            patch: switchboard_protocol::safety::ConversationPatch {
                frozen: Some(true),
                ..Default::default()
            },
        }))
    };
    let audited = |out: &[Outcome]| -> Vec<(AuditAction, String)> {
        out.iter()
            .filter_map(|o| match o {
                Outcome::Audited { entry, id, .. } => Some((entry.action, id.clone())),
                _ => None,
            })
            .collect()
    };
    run(
        &mut seq,
        &store,
        &ids,
        &[create("c", ConversationKind::Group, &["a", "b"], 1)],
    )
    .await;
    let out = run(&mut seq, &store, &ids, &[mute(10, true), mute(11, false)]).await;
    assert_eq!(
        audited(&out),
        [
            (AuditAction::MemberMuted, "audit-10".into()),
            (AuditAction::MemberUnmuted, "audit-11".into())
        ]
    );
    // The unmute again, as after a crash: recorded again, same id.
    let out = run(&mut seq, &store, &ids, &[mute(11, false)]).await;
    assert_eq!(
        audited(&out),
        [(AuditAction::MemberUnmuted, "audit-11".into())]
    );
    let out = run(&mut seq, &store, &ids, &[freeze(20)]).await;
    assert_eq!(
        audited(&out),
        [(AuditAction::ConversationFrozen, "audit-20".into())]
    );
    let out = run(&mut seq, &store, &ids, &[freeze(20)]).await;
    assert_eq!(
        audited(&out),
        [(AuditAction::ConversationFrozen, "audit-20".into())],
        "replayed"
    );
    let out = run(&mut seq, &store, &ids, &[freeze(21)]).await;
    assert_eq!(audited(&out), [], "already frozen: nothing changed");
}
