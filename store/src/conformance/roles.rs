//! Checks of members' v1.1 state: roles by default and as given, a group
//! whose owners left, and each member's own settings.

use std::sync::Arc;

use switchboard_protocol::{ConversationKind, MemberSettings, NotificationLevel, Role, Timestamp};

use super::support::{create, everything, key, tenant, unique_tenant, user};
use crate::{MemberState, Mutation, Store, StoreError};

async fn roles_in(store: &dyn Store, t: &str, c: &str, reader: &str) -> Vec<(String, Role)> {
    let detail = store
        .conversation(&tenant(t), &super::support::conv(c), &user(reader))
        .await
        .unwrap();
    detail
        .members
        .iter()
        .map(|m| (m.user_id.as_str().to_owned(), m.role))
        .collect()
}

fn state(role: Option<Role>) -> MemberState {
    MemberState {
        role,
        settings: MemberSettings::default(),
        history_from: None,
    }
}

pub async fn roles_follow_the_creator_what_was_given_and_who_is_left(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("roles");
    store
        .commit(vec![
            create(t, "g", ConversationKind::Group, &["ann", "bob", "cat"], 10),
            create(t, "d", ConversationKind::Direct, &["ann", "bob"], 10),
        ])
        .await
        .unwrap();
    // Made before any role was given: the creator owns the group; a
    // direct conversation has members only.
    assert_eq!(
        roles_in(store, t, "g", "bob").await,
        [
            ("ann".to_owned(), Role::Owner),
            ("bob".to_owned(), Role::Member),
            ("cat".to_owned(), Role::Member)
        ]
    );
    assert!(
        roles_in(store, t, "d", "ann")
            .await
            .iter()
            .all(|(_, r)| *r == Role::Member)
    );
    // Given roles show, to every reader and to the sequencer.
    store
        .commit(vec![Mutation::SetMemberState {
            key: key(t, "g"),
            user: user("cat"),
            state: state(Some(Role::Admin)),
        }])
        .await
        .unwrap();
    let seq_state = store.sequencer_states(vec![key(t, "g")]).await.unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(seq_state.role_of(&user("cat")), Role::Admin);
    assert_eq!(seq_state.role_of(&user("ann")), Role::Owner);
    // Not a member: refused, nothing written.
    let refused = store
        .commit(vec![Mutation::SetMemberState {
            key: key(t, "g"),
            user: user("zed"),
            state: state(Some(Role::Admin)),
        }])
        .await;
    assert_eq!(refused, Err(StoreError::NotAMember));
    // The owner leaves: the earliest admin owns the group.
    store
        .commit(vec![Mutation::RemoveMembers {
            key: key(t, "g"),
            users: vec![user("ann")],
        }])
        .await
        .unwrap();
    assert_eq!(
        roles_in(store, t, "g", "bob").await,
        [
            ("bob".to_owned(), Role::Member),
            ("cat".to_owned(), Role::Owner)
        ]
    );
    // Leaving takes the state along: back in, a member again.
    store
        .commit(vec![
            Mutation::RemoveMembers {
                key: key(t, "g"),
                users: vec![user("cat")],
            },
            Mutation::AddMembers {
                key: key(t, "g"),
                users: vec![user("cat")],
                at: Timestamp::from_unix_ms(99),
                unsolicited: None,
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        roles_in(store, t, "g", "bob").await,
        [
            ("bob".to_owned(), Role::Owner),
            ("cat".to_owned(), Role::Member)
        ]
    );
}

pub async fn a_members_own_settings_are_theirs_and_listed(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("settings");
    store
        .commit(vec![create(
            t,
            "g",
            ConversationKind::Group,
            &["ann", "bob"],
            10,
        )])
        .await
        .unwrap();
    let quiet = MemberSettings {
        notifications: NotificationLevel::Mentions,
        muted_until: Some(Timestamp::from_unix_ms(1_900_000_000_000)),
    };
    store
        .commit(vec![Mutation::SetMemberState {
            key: key(t, "g"),
            user: user("bob"),
            state: MemberState {
                role: None,
                settings: quiet.clone(),
                history_from: None,
            },
        }])
        .await
        .unwrap();
    let bobs = store
        .conversation_page(&tenant(t), &user("bob"), everything())
        .await
        .unwrap();
    assert_eq!(bobs[0].me.settings, quiet);
    let anns = store
        .conversation_page(&tenant(t), &user("ann"), everything())
        .await
        .unwrap();
    assert_eq!(anns[0].me.settings, MemberSettings::default());
    let seq_state = store.sequencer_states(vec![key(t, "g")]).await.unwrap()[0]
        .clone()
        .unwrap();
    assert_eq!(seq_state.settings_of(&user("bob")), quiet);
    // Back to the default: no row, the same answers.
    store
        .commit(vec![Mutation::SetMemberState {
            key: key(t, "g"),
            user: user("bob"),
            state: MemberState::default(),
        }])
        .await
        .unwrap();
    let seq_state = store.sequencer_states(vec![key(t, "g")]).await.unwrap()[0]
        .clone()
        .unwrap();
    assert!(seq_state.states.is_empty());
}
