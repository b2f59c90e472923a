//! Checks of v1.3's open channels: the directory follows a
//! conversation's visibility and topic, a join makes a member with their
//! marks and history floor and counts the invite's use, invites are
//! found by code until revoked.

use std::sync::Arc;

use switchboard_protocol::channels::{ChannelSettings, Invite, Visibility};
use switchboard_protocol::{ConversationKind, Timestamp};

use super::support::{conv, create, key, seed_conversation, tenant, unique_tenant, user};
use crate::{Mutation, Store};

fn public(topic: Option<&str>) -> ChannelSettings {
    ChannelSettings {
        visibility: Visibility::Public,
        topic: topic.map(str::to_owned),
        ..ChannelSettings::default()
    }
}

fn settings(t: &str, c: &str, channel: ChannelSettings) -> Mutation {
    Mutation::SetPolicy {
        key: key(t, c),
        policy: Default::default(),
        custom: Default::default(),
        channel,
        mutes: Vec::new(),
    }
}

pub async fn public_channels_are_listed_joined_and_invited_to(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("channels");
    seed_conversation(store, t, "c1", &["ann", "bob"], 3).await;
    let mut titled = create(t, "c2", ConversationKind::Channel, &["ann"], 10);
    if let Mutation::CreateConversation { record, .. } = &mut titled {
        record.title = Some("Releases".into());
    }
    store
        .commit(vec![
            titled,
            create(t, "c3", ConversationKind::Group, &["ann"], 10),
        ])
        .await
        .unwrap();

    // Public ones are listed in id order with their title and topic;
    // private ones are not; going private again takes it out.
    for (c, channel) in [
        ("c1", public(Some("all about rust"))),
        ("c2", public(None)),
        ("c3", public(None)),
    ] {
        store.commit(vec![settings(t, c, channel)]).await.expect(c);
    }
    store
        .commit(vec![settings(t, "c3", ChannelSettings::default())])
        .await
        .unwrap();
    let listed = store.directory(&tenant(t), None, 10).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"]);
    assert_eq!(listed[0].1.topic.as_deref(), Some("all about rust"));
    assert_eq!(listed[1].1.title.as_deref(), Some("Releases"));
    let rest = store
        .directory(&tenant(t), Some(conv("c1")), 10)
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].0, conv("c2"));
    assert_eq!(store.directory(&tenant(t), None, 1).await.unwrap().len(), 1);
    assert!(
        store
            .directory(&tenant("elsewhere"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The record and the sequencer's state carry the settings.
    let state = store.sequencer_states(vec![key(t, "c1")]).await.unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(state.channel, public(Some("all about rust")));

    // An invite, found by its code; a join with it makes a member whose
    // marks start at `read_to` and who reads from `history_from`.
    let invite = Invite {
        code: "Code1".into(),
        conversation_id: conv("c1"),
        created_by: user("ann"),
        created_at: Timestamp::from_unix_ms(20),
        max_uses: Some(2),
        uses: 0,
        expires_at: None,
    };
    let c1 = key(t, "c1");
    store
        .commit(vec![Mutation::SetInvite {
            key: c1.clone(),
            code: "Code1".into(),
            invite: Some(invite.clone()),
        }])
        .await
        .unwrap();
    assert_eq!(
        store.invite_by_code(&tenant(t), "Code1").await.unwrap(),
        Some(invite.clone())
    );
    let used = Invite {
        uses: 1,
        ..invite.clone()
    };
    store
        .commit(vec![Mutation::Join {
            key: c1.clone(),
            user: user("cat"),
            at: Timestamp::from_unix_ms(30),
            read_to: 3,
            history_from: Some(4),
            invite: Some(used.clone()),
        }])
        .await
        .unwrap();
    assert_eq!(store.invites(&c1).await.unwrap(), vec![used]);
    let detail = store
        .conversation(&tenant(t), &conv("c1"), &user("cat"))
        .await
        .unwrap();
    let cat = detail.members.iter().find(|m| m.user_id == user("cat"));
    assert_eq!(cat.map(|m| (m.read_seq, m.delivered_seq)), Some((3, 3)));
    assert_eq!(detail.reader_unread_count, 0);
    let floors = store
        .history_floors(&tenant(t), &user("cat"), vec![conv("c1"), conv("c2")])
        .await
        .unwrap();
    assert_eq!(floors, vec![4, 0]);
    let counts = store
        .member_counts(vec![c1.clone(), key(t, "c2"), key(t, "none")])
        .await
        .unwrap();
    assert_eq!(counts, vec![3, 1, 0]);

    // Revoked: neither listed nor found by its code.
    store
        .commit(vec![Mutation::SetInvite {
            key: c1.clone(),
            code: "Code1".into(),
            invite: None,
        }])
        .await
        .unwrap();
    assert!(store.invites(&c1).await.unwrap().is_empty());
    assert_eq!(
        store.invite_by_code(&tenant(t), "Code1").await.unwrap(),
        None
    );

    // A join where the history is for newcomers leaves no floor.
    store
        .commit(vec![Mutation::Join {
            key: key(t, "c2"),
            user: user("cat"),
            at: Timestamp::from_unix_ms(40),
            read_to: 0,
            history_from: None,
            invite: None,
        }])
        .await
        .unwrap();
    let floors = store
        .history_floors(&tenant(t), &user("cat"), vec![conv("c2")])
        .await
        .unwrap();
    assert_eq!(floors, vec![0]);
}
