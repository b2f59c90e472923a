//! Identifier newtypes.
//!
//! Tenant, user, device and conversation ids are 1-128 characters from
//! `[A-Za-z0-9._:@-]` (docs/protocol.md). They are validated once, when they enter
//! the system, so the rest of the code can trust them, for example when they
//! are turned into NATS subject tokens or storage keys.
//! Message ids are Snowflake ids: 64-bit integers sent as decimal strings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest id the protocol allows, in bytes (all allowed characters are ASCII).
pub const MAX_ID_LEN: usize = 128;

/// The longest `client_msg_id`; it is chosen by clients, so it has its own,
/// looser character rules (any printable, non-whitespace character).
pub const MAX_CLIENT_MSG_ID_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} must not be empty")]
    Empty { kind: &'static str },
    #[error("{kind} is longer than {max} characters")]
    TooLong { kind: &'static str, max: usize },
    #[error("{kind} contains a character outside [A-Za-z0-9._:@-]")]
    BadChar { kind: &'static str },
    #[error("{kind} must be printable characters without whitespace")]
    NotPrintable { kind: &'static str },
    #[error("message id must be a decimal 64-bit integer")]
    BadMessageId,
}

/// Whether `c` may appear in a tenant, user, device or conversation id.
pub fn is_id_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'@' | b'-')
}

fn validate_id(kind: &'static str, s: &str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if s.len() > MAX_ID_LEN {
        return Err(IdError::TooLong {
            kind,
            max: MAX_ID_LEN,
        });
    }
    if !s.bytes().all(is_id_char) {
        return Err(IdError::BadChar { kind });
    }
    Ok(())
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps an id.
            pub fn new(s: impl Into<String>) -> Result<Self, IdError> {
                let s = s.into();
                validate_id($kind, &s)?;
                Ok(Self(s))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_id!(
    /// A tenant: one company running its chat on Switchboard.
    TenantId,
    "tenant id"
);
string_id!(
    /// A user, unique within a tenant.
    UserId,
    "user id"
);
string_id!(
    /// A device of a user (the JWT `device` claim, default `"default"`).
    DeviceId,
    "device id"
);
string_id!(
    /// A conversation, unique within a tenant.
    ConversationId,
    "conversation id"
);

impl DeviceId {
    /// The device a token without a `device` claim stands for.
    pub fn default_device() -> Self {
        Self("default".to_owned())
    }
}

/// The sender's idempotency key for one message.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientMsgId(String);

impl ClientMsgId {
    pub fn new(s: impl Into<String>) -> Result<Self, IdError> {
        let s = s.into();
        const KIND: &str = "client_msg_id";
        if s.is_empty() {
            return Err(IdError::Empty { kind: KIND });
        }
        if s.len() > MAX_CLIENT_MSG_ID_LEN {
            return Err(IdError::TooLong {
                kind: KIND,
                max: MAX_CLIENT_MSG_ID_LEN,
            });
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(IdError::NotPrintable { kind: KIND });
        }
        Ok(Self(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Tables keyed by it are looked up by the `&str` of a frame (the derived
/// `Hash` and `Eq` are the inner string's).
impl std::borrow::Borrow<str> for ClientMsgId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClientMsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClientMsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClientMsgId({:?})", self.0)
    }
}

impl Serialize for ClientMsgId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ClientMsgId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

/// A Snowflake message id. On the wire it is always a decimal string,
/// because JavaScript numbers cannot hold 64-bit integers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(u64);

impl MessageId {
    pub const fn from_u64(v: u64) -> Self {
        Self(v)
    }

    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MessageId({})", self.0)
    }
}

impl FromStr for MessageId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(IdError::BadMessageId);
        }
        s.parse::<u64>()
            .map(Self)
            .map_err(|_| IdError::BadMessageId)
    }
}

impl Serialize for MessageId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        for ok in ["a", "alice", "Bob.42", "x_y:z@w-v", &"a".repeat(128)] {
            assert!(UserId::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_everything_else() {
        assert_eq!(UserId::new(""), Err(IdError::Empty { kind: "user id" }));
        assert!(matches!(
            UserId::new("a".repeat(129)),
            Err(IdError::TooLong { .. })
        ));
        for bad in ["a b", "a*b", "a>b", "a/b", "é", "a\0"] {
            assert!(
                matches!(TenantId::new(bad), Err(IdError::BadChar { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn message_ids_are_decimal_strings_on_the_wire() {
        let id = MessageId::from_u64(u64::MAX);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"18446744073709551615\"");
        assert_eq!(serde_json::from_str::<MessageId>(&json).unwrap(), id);
        assert!(
            serde_json::from_str::<MessageId>("12").is_err(),
            "numbers are refused"
        );
        assert!(serde_json::from_str::<MessageId>("\"-1\"").is_err());
        assert!(serde_json::from_str::<MessageId>("\"18446744073709551616\"").is_err());
    }

    #[test]
    fn client_msg_ids_are_printable() {
        assert!(ClientMsgId::new("7f1c-é✓").is_ok());
        assert!(ClientMsgId::new("a b").is_err());
        assert!(ClientMsgId::new("").is_err());
    }
}
