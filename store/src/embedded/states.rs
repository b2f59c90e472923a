//! Members' v1.1 state in fjall: the `member_states` rows (a given role,
//! the member's own settings) and the roles that follow from them
//! (`crate::roles`).

use std::collections::BTreeMap;

use fjall::Readable;
use switchboard_protocol::{ConversationKind, Role, Timestamp, UserId};

use super::codec::{decode, storage};
use super::keys::{Key, Spaces, read_words, str_part};
use super::lookup::{scan, user_id};
use crate::roles::{Joined, effective};
use crate::{MemberState, StoreResult};

/// One member's state; the default when no row is stored.
pub(super) fn member_state<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    u: &str,
) -> StoreResult<MemberState> {
    match r
        .get(&s.member_states, Key::new().s(t).s(c).s(u).bytes())
        .map_err(storage)?
    {
        Some(v) => decode(&v),
        None => Ok(MemberState::default()),
    }
}

/// The conversation's stored states, by user id (members with the
/// default state have none).
pub(super) fn member_states<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
) -> StoreResult<BTreeMap<String, MemberState>> {
    scan(r, &s.member_states, Key::new().s(t).s(c).bytes())
        .map(|kv| {
            let (k, v) = kv?;
            Ok((str_part(&k, 2)?.to_owned(), decode(&v)?))
        })
        .collect()
}

/// Every member's role, from the `members` rows alone (no marks read):
/// what the sequencer loads.
pub(super) fn roles<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    c: &str,
    kind: ConversationKind,
    created_by: &UserId,
    states: &BTreeMap<String, MemberState>,
) -> StoreResult<BTreeMap<UserId, Role>> {
    let joined = scan(r, &s.members, Key::new().s(t).s(c).bytes())
        .map(|kv| {
            let (k, v) = kv?;
            let u = str_part(&k, 2)?;
            let [at] = read_words::<1>(&v)?;
            Ok(Joined {
                user: user_id(u)?,
                at: Timestamp::from_unix_ms(at as i64),
                given: states.get(u).and_then(|st| st.role),
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(effective(kind, created_by, &joined))
}
