//! What travels on the wire: a [`Request`] for each call of `calls.rs`,
//! the [`Access`] it needs (so the subject it goes to), and the
//! [`Reply`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use switchboard_nats::subject::{STORE_MARKS, STORE_READ, STORE_WRITE};
use switchboard_protocol::reports::ReportStatus;
use switchboard_protocol::{ConversationId, DeviceId, MessageId, TenantId, Timestamp, UserId};
use switchboard_store::{
    BucketKey, ConsentQuery, ConversationKey, HistoryQuery, InboxCursor, ListQuery, MessageKey,
    Mutation, SentKey, StoreError, StoreResult,
};

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

/// The owned type an argument travels as.
macro_rules! owned {
    (& $($t:tt)+) => { <$($t)+ as ToOwned>::Owned };
    ($($t:tt)+) => { $($t)+ };
}

macro_rules! requests {
    (
        read { $( $read:ident ( $($rarg:ident : [$($rty:tt)+]),* ) -> $rret:ty; )* }
        marks { $( $mark:ident ( $($marg:ident : [$($mty:tt)+]),* ) -> $mret:ty; )* }
        write { $( $write:ident ( $($warg:ident : [$($wty:tt)+]),* ) -> $wret:ty; )* }
        paged { $( $paged:ident ( $($parg:ident : [$($pty:tt)+]),* ) -> $pret:ty; )* }
    ) => {
        /// A call to the served store. Variants are named as the methods
        /// (and so serialised as they were when written by hand).
        #[allow(non_camel_case_types)]
        #[derive(Debug, Serialize, Deserialize)]
        #[serde(tag = "op")]
        pub enum Request {
            $( $read { $($rarg: owned!($($rty)+)),* }, )*
            $( $mark { $($marg: owned!($($mty)+)),* }, )*
            $( $write { $($warg: owned!($($wty)+)),* }, )*
            $( $paged { $($parg: owned!($($pty)+)),* }, )*
        }

        impl Request {
            pub(crate) fn access(&self) -> Access {
                match self {
                    $( Request::$read { .. } )|* $( | Request::$paged { .. } )* => Access::Read,
                    $( Request::$mark { .. } )|* => Access::Marks,
                    $( Request::$write { .. } )|* => Access::Write,
                }
            }
        }
    };
}

store_calls!(requests);

/// The answer on the wire: `{"ok": …}` or `{"err": StoreError}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reply<T> {
    Ok(T),
    Err(StoreError),
}

/// A request as the service decodes it, whichever endpoint it came to.
pub fn decode_request(payload: &[u8]) -> Result<Request, serde_json::Error> {
    serde_json::from_slice(payload)
}

/// A reply as the caller decodes it: the call's result.
pub fn decode_reply<T: DeserializeOwned>(payload: &[u8]) -> StoreResult<T> {
    match serde_json::from_slice::<Reply<T>>(payload) {
        Ok(Reply::Ok(v)) => Ok(v),
        Ok(Reply::Err(e)) => Err(e),
        Err(e) => Err(StoreError::Corrupt(format!("bad store reply: {e}"))),
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
        let ping = serde_json::to_value(Request::ping {}).unwrap();
        assert_eq!(ping, json!({"op": "ping"}));
        let referenced = Request::media_referenced {
            tenant: TenantId::new("acme").unwrap(),
            blob_ref: "b1".into(),
        };
        assert_eq!(
            serde_json::to_value(referenced).unwrap(),
            json!({"op": "media_referenced", "tenant": "acme", "blob_ref": "b1"})
        );
        // An inbox request without `after` (older callers) reads from the start.
        let inbox: Request = serde_json::from_value(json!({
            "op": "inbox", "tenant": "acme", "user": "u", "device": "d", "limit": 5
        }))
        .unwrap();
        assert!(matches!(
            inbox,
            Request::inbox {
                after: None,
                limit: 5,
                ..
            }
        ));
    }

    /// Only the conversation writers and the leader's sweeps write; a
    /// gateway's writes are its users' marks and devices.
    #[test]
    fn each_call_asks_where_its_callers_may() {
        let commit = Request::commit { mutations: vec![] };
        assert_eq!(commit.access(), Access::Write);
        let sweep: Request = serde_json::from_value(json!({
            "op": "expire_inbox", "before": "2026-01-01T00:00:00Z", "cursor": null, "budget": 1
        }))
        .unwrap();
        assert_eq!(sweep.access(), Access::Write);
        let read: Request = serde_json::from_value(json!({
            "op": "ack_read", "tenant": "t", "user": "u", "conversation": "c", "seq": 1
        }))
        .unwrap();
        assert_eq!(read.access(), Access::Marks);
        let history: Request = serde_json::from_value(json!({
            "op": "history", "tenant": "t", "conversation": "c", "reader": "u",
            "query": {"before_seq": null, "after_seq": null, "limit": 5}
        }))
        .unwrap();
        assert_eq!(history.access(), Access::Read);
        assert_eq!(Request::ping {}.access(), Access::Read);
    }
}
