//! Ids as parts of KV keys. A key may hold only `-/_=.` and ASCII letters
//! and digits, and `.` separates its parts; ids may also hold `.`, `:` and
//! `@` (an email address is a fine user id). Every other byte is written
//! `=XX` (hex); `=` is never part of an id, so the escape is unambiguous,
//! and the common id is its own key part.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `id` as one part of a KV key.
pub fn part(id: &str) -> Cow<'_, str> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if id.bytes().all(plain) {
        return Cow::Borrowed(id);
    }
    let mut out = String::with_capacity(id.len() + 8);
    for b in id.bytes() {
        if plain(b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "={b:02X}");
        }
    }
    Cow::Owned(out)
}

/// The id a key part was made from, if it is one.
pub fn id(part: &str) -> Option<String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'=' {
            let hex = part.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The characters NATS accepts in a key (async-nats' own check).
    fn valid_key(key: &str) -> bool {
        !key.is_empty()
            && !key.starts_with('.')
            && !key.ends_with('.')
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-/_=.".contains(&b))
    }

    #[test]
    fn every_id_character_makes_a_valid_key_and_comes_back() {
        for original in [
            "alice",
            "ann.lee@example.com",
            "dm:alice:bob",
            "a-b_c",
            "x.y.z",
            "@",
        ] {
            let p = part(original);
            assert!(valid_key(&format!("{p}.{p}")), "{original} -> {p}");
            assert!(!p.contains('.'), "a part has no separator: {p}");
            assert_eq!(id(&p).as_deref(), Some(original));
        }
        assert_eq!(part("alice"), "alice", "plain ids are their own part");
        assert_eq!(part("ann.lee@x"), "ann=2Elee=40x");
        assert_eq!(id("bad=4"), None);
        assert_eq!(id("bad=ZZ"), None);
    }
}
