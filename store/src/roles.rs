//! Who is owner, admin or member of a conversation (v1.1): the one rule
//! every reader applies (the sequencer deciding who may do what, the
//! conversation's detail, the backends).
//!
//! A role is stored only once someone gives it. Until then, and for
//! conversations made before roles existed (no migration writes them):
//! - both sides of a direct conversation are members;
//! - the creator of a group or channel is its owner;
//! - a group or channel left with no owner (its owners left, or its
//!   creator is gone) has one anyway: its earliest admin, else its
//!   earliest member (by when they joined, then by id), as a group with
//!   no one who may run it helps nobody.

use std::collections::BTreeMap;

use switchboard_protocol::{ConversationKind, Role, Timestamp, UserId};

use crate::{MemberRecord, MemberState};

/// One member as the rule needs them: when they joined, and the role
/// given to them if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub user: UserId,
    pub at: Timestamp,
    pub given: Option<Role>,
}

/// Every member's role.
pub fn effective(
    kind: ConversationKind,
    created_by: &UserId,
    members: &[Joined],
) -> BTreeMap<UserId, Role> {
    if kind == ConversationKind::Direct {
        return members
            .iter()
            .map(|m| (m.user.clone(), Role::Member))
            .collect();
    }
    let mut roles: BTreeMap<UserId, Role> = members
        .iter()
        .map(|m| {
            let role = m.given.unwrap_or(if m.user == *created_by {
                Role::Owner
            } else {
                Role::Member
            });
            (m.user.clone(), role)
        })
        .collect();
    if !roles.values().any(|r| *r == Role::Owner) {
        let earliest = |wanted: Role| {
            members
                .iter()
                .filter(|m| roles.get(&m.user) == Some(&wanted))
                .min_by(|a, b| a.at.cmp(&b.at).then_with(|| a.user.cmp(&b.user)))
                .map(|m| m.user.clone())
        };
        if let Some(heir) = earliest(Role::Admin).or_else(|| earliest(Role::Member)) {
            roles.insert(heir, Role::Owner);
        }
    }
    roles
}

/// Fills each member's role (by [`effective`]) and settings in, from the
/// conversation's stored states (by user id).
pub fn fill_in(
    kind: ConversationKind,
    created_by: &UserId,
    members: &mut [MemberRecord],
    states: &BTreeMap<String, MemberState>,
) {
    let joined: Vec<Joined> = members
        .iter()
        .map(|m| Joined {
            user: m.user_id.clone(),
            at: m.joined_at,
            given: states.get(m.user_id.as_str()).and_then(|s| s.role),
        })
        .collect();
    let roles = effective(kind, created_by, &joined);
    for m in members {
        m.role = roles.get(&m.user_id).copied().unwrap_or(Role::Member);
        if let Some(state) = states.get(m.user_id.as_str()) {
            m.settings = state.settings.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(u: &str) -> UserId {
        UserId::new(u).unwrap()
    }

    fn joined(u: &str, at: i64, given: Option<Role>) -> Joined {
        Joined {
            user: user(u),
            at: Timestamp::from_unix_ms(at),
            given,
        }
    }

    fn check(kind: ConversationKind, creator: &str, members: &[Joined], want: &[(&str, Role)]) {
        let got = effective(kind, &user(creator), members);
        let want: BTreeMap<UserId, Role> = want.iter().map(|(u, r)| (user(u), *r)).collect();
        assert_eq!(got, want, "{kind:?} made by {creator}: {members:?}");
    }

    #[test]
    fn roles_by_the_table() {
        use ConversationKind::{Channel, Direct, Group};
        use Role::{Admin, Member, Owner};
        // A group made before roles: its creator owns it.
        check(
            Group,
            "ann",
            &[joined("ann", 1, None), joined("bob", 1, None)],
            &[("ann", Owner), ("bob", Member)],
        );
        // Direct: members, whoever opened it, whatever was given.
        check(
            Direct,
            "ann",
            &[joined("ann", 1, None), joined("bob", 1, Some(Owner))],
            &[("ann", Member), ("bob", Member)],
        );
        // Given roles win over the default.
        check(
            Channel,
            "ann",
            &[
                joined("ann", 1, Some(Member)),
                joined("bob", 2, Some(Owner)),
                joined("cat", 3, Some(Admin)),
            ],
            &[("ann", Member), ("bob", Owner), ("cat", Admin)],
        );
        // The creator left: the earliest admin inherits...
        check(
            Group,
            "gone",
            &[
                joined("bob", 5, None),
                joined("cat", 7, Some(Admin)),
                joined("dan", 6, Some(Admin)),
            ],
            &[("bob", Member), ("cat", Admin), ("dan", Owner)],
        );
        // ...else the earliest member, ties by id.
        check(
            Group,
            "gone",
            &[joined("cat", 5, None), joined("bob", 5, None)],
            &[("bob", Owner), ("cat", Member)],
        );
        // Nobody: nothing.
        check(Group, "gone", &[], &[]);
    }
}
