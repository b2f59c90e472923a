//! The app's own fields (v1.3): `custom` on profiles, conversations and
//! messages, each a JSON object with one bound, and the merge that the
//! admin-set ones follow.

use serde_json::{Map, Value};

/// The largest `custom` object (of a profile, a conversation or a
/// message), as compact JSON, in bytes.
pub const MAX_CUSTOM_BYTES: usize = 4096;

/// The size of a JSON object as compact JSON, in bytes (the `custom`
/// fields' and a custom message's `data` limits count this).
pub fn json_len(object: &Map<String, Value>) -> usize {
    serde_json::to_vec(object).map_or(usize::MAX, |v| v.len())
}

/// `current` after `patch`: each key given is set, a key given as `null`
/// is removed, the others stay. `None` when the result is over
/// [`MAX_CUSTOM_BYTES`].
pub fn merged(
    current: &Map<String, Value>,
    patch: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let mut next = current.clone();
    for (k, v) in patch {
        if v.is_null() {
            next.remove(k);
        } else {
            next.insert(k.clone(), v.clone());
        }
    }
    (json_len(&next) <= MAX_CUSTOM_BYTES).then_some(next)
}
