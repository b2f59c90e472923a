//! What travels on the wire: a [`Request`] (one of the store's reads,
//! or a [`Call`] of `calls.rs`), the [`Access`] it needs (so the subject
//! it goes to), and the [`Reply`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use switchboard_nats::subject::{STORE_MARKS, STORE_READ, STORE_WRITE};
use switchboard_protocol::{ConversationId, DeviceId, MessageId, TenantId, Timestamp, UserId};
use switchboard_store::{Answer, Mutation, Read, StoreError, StoreResult};

use crate::calls::store_calls;

/// Who may make a call, and so where it is asked. The backbone's
/// permissions give each subject to the roles that may use it
/// (`nats/server/secure/accounts.conf`): a gateway may read and move its
/// users' marks, never commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Marks,
    Write,
}

impl Access {
    pub(crate) const ALL: [Access; 3] = [Access::Read, Access::Marks, Access::Write];

    pub(crate) fn subject(self) -> &'static str {
        match self {
            Access::Read => STORE_READ,
            Access::Marks => STORE_MARKS,
            Access::Write => STORE_WRITE,
        }
    }

    /// The endpoint's name in the NATS micro service.
    pub(crate) fn endpoint(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Marks => "marks",
            Access::Write => "write",
        }
    }
}

macro_rules! calls {
    (
        read { $( $read:ident ( $($rarg:ident : [$($rty:tt)+]),* ) -> $rret:ty; )* }
        marks { $( $mark:ident ( $($marg:ident : [$($mty:tt)+]),* ) -> $mret:ty; )* }
        write { $( $write:ident ( $($warg:ident : [$($wty:tt)+]),* ) -> $wret:ty; )* }
    ) => {
        /// A call to the served store other than a read. Variants are
        /// named as the methods (and so serialised as they were when
        /// written by hand).
        #[allow(non_camel_case_types)]
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(tag = "op")]
        pub enum Call {
            $( $read { $($rarg: ::switchboard_store::arg_type!($($rty)+)),* }, )*
            $( $mark { $($marg: ::switchboard_store::arg_type!($($mty)+)),* }, )*
            $( $write { $($warg: ::switchboard_store::arg_type!($($wty)+)),* }, )*
        }

        impl Call {
            const NAMES: &[&str] = &[
                $( stringify!($read), )* $( stringify!($mark), )* $( stringify!($write), )*
            ];

            pub(crate) fn access(&self) -> Access {
                match self {
                    $( Call::$read { .. } )|* => Access::Read,
                    $( Call::$mark { .. } )|* => Access::Marks,
                    $( Call::$write { .. } )|* => Access::Write,
                }
            }
        }
    };
}

store_calls!(calls);

/// A request to the served store: one of its reads, or another call.
/// Both are `{"op": "<method>", <arguments>}` on the wire.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Request {
    Read(Read),
    Call(Call),
}

impl Request {
    pub(crate) fn access(&self) -> Access {
        match self {
            Request::Read(_) => Access::Read,
            Request::Call(call) => call.access(),
        }
    }
}

/// The answer on the wire: `{"ok": …}` or `{"err": StoreError}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reply<T> {
    Ok(T),
    Err(StoreError),
}

/// A request as the service decodes it, whichever endpoint it came to:
/// its `op` says whether it is a read or another call.
pub fn decode_request(payload: &[u8]) -> Result<Request, serde_json::Error> {
    #[derive(Deserialize)]
    struct Op<'a> {
        #[serde(borrow)]
        op: std::borrow::Cow<'a, str>,
    }
    let Op { op } = serde_json::from_slice(payload)?;
    if Call::NAMES.contains(&op.as_ref()) {
        serde_json::from_slice(payload).map(Request::Call)
    } else {
        serde_json::from_slice(payload).map(Request::Read)
    }
}

/// A reply as the caller decodes it: the call's result.
pub fn decode_reply<T: DeserializeOwned>(payload: &[u8]) -> StoreResult<T> {
    match serde_json::from_slice::<Reply<T>>(payload) {
        Ok(Reply::Ok(v)) => Ok(v),
        Ok(Reply::Err(e)) => Err(e),
        Err(e) => Err(StoreError::Corrupt(format!("bad store reply: {e}"))),
    }
}

/// The answer to `read` as the caller decodes it from its reply.
pub fn decode_answer(read: &Read, payload: &[u8]) -> StoreResult<Answer> {
    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum RawReply<'a> {
        #[serde(borrow)]
        Ok(&'a RawValue),
        Err(StoreError),
    }
    let bad = |e: serde_json::Error| StoreError::Corrupt(format!("bad store reply: {e}"));
    match serde_json::from_slice::<RawReply<'_>>(payload).map_err(bad)? {
        RawReply::Ok(value) => read.answer_from(value).map_err(bad),
        RawReply::Err(e) => Err(e),
    }
}

/// Encodes a store call's result as its reply.
pub(crate) fn reply<T: Serialize>(result: StoreResult<T>) -> Vec<u8> {
    let encoded = match result {
        Ok(v) => serde_json::to_vec(&Reply::Ok(v)),
        Err(e) => serde_json::to_vec(&Reply::<()>::Err(e)),
    };
    encoded.unwrap_or_else(|e| {
        serde_json::to_vec(&Reply::<()>::Err(StoreError::Corrupt(format!(
            "encode reply: {e}"
        ))))
        .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// Processes of two releases talk during a rolling upgrade: the
    /// requests keep the shape they had when written by hand.
    #[test]
    fn requests_keep_their_wire_format() {
        let ping = serde_json::to_value(Request::Call(Call::ping {})).unwrap();
        assert_eq!(ping, json!({"op": "ping"}));
        let referenced = Request::Read(Read::MediaReferenced {
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: "b1".into(),
        });
        let encoded = serde_json::to_vec(&referenced).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&encoded).unwrap(),
            json!({"op": "media_referenced", "tenant": "acme", "blob_ref": "b1"})
        );
        assert!(matches!(
            decode_request(&encoded).unwrap(),
            Request::Read(Read::MediaReferenced { .. })
        ));
        let commit = decode_request(br#"{"op": "commit", "mutations": []}"#).unwrap();
        assert!(matches!(commit, Request::Call(Call::commit { .. })));
        // An unknown op, or a known one with bad arguments, is an error.
        assert!(decode_request(br#"{"op": "drop_everything"}"#).is_err());
        assert!(decode_request(br#"{"op": "commit"}"#).is_err());
        assert!(decode_request(br#"{"op": "pins"}"#).is_err());
    }

    /// A read's answer is decoded as the read it answers.
    #[test]
    fn answers_are_decoded_by_their_read() {
        let read = Read::MediaReferenced {
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: "b1".into(),
        };
        let ok = reply::<Answer>(Ok(Answer::MediaReferenced(true)));
        assert_eq!(
            decode_answer(&read, &ok).unwrap(),
            Answer::MediaReferenced(true)
        );
        let refused = reply::<Answer>(Err(StoreError::NotFound));
        assert_eq!(decode_answer(&read, &refused), Err(StoreError::NotFound));
        assert!(matches!(
            decode_answer(&read, br#"{"ok": [1, 2]}"#),
            Err(StoreError::Corrupt(_))
        ));
    }

    /// Only the conversation writers and the leader's sweeps write; a
    /// gateway's writes are its users' marks and devices.
    #[test]
    fn each_call_asks_where_its_callers_may() {
        let decode = |v: serde_json::Value| decode_request(&serde_json::to_vec(&v).unwrap());
        let commit = Request::Call(Call::commit { mutations: vec![] });
        assert_eq!(commit.access(), Access::Write);
        let sweep = decode(json!({
            "op": "expire_inbox", "before": "2026-01-01T00:00:00Z", "cursor": null, "budget": 1
        }))
        .unwrap();
        assert_eq!(sweep.access(), Access::Write);
        let read = decode(json!({
            "op": "ack_read", "tenant": "t", "user": "u", "conversation": "c", "seq": 1
        }))
        .unwrap();
        assert_eq!(read.access(), Access::Marks);
        let history = decode(json!({
            "op": "history", "tenant": "t", "conversation": "c", "reader": "u",
            "query": {"before_seq": null, "after_seq": null, "limit": 5}
        }))
        .unwrap();
        assert_eq!(history.access(), Access::Read);
        assert_eq!(Request::Call(Call::ping {}).access(), Access::Read);
    }
}
