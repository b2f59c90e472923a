//! The push providers: one call per push, and what its answer means
//! (the call and its bounds are `switchboard_outbound`'s).

pub mod apns;
pub mod fcm;
pub mod webhook;

// The calls themselves are every outbound delivery's.
pub(crate) use switchboard_outbound::{
    Attempt, Clients, answer, by_status, read_capped, transport,
};

use switchboard_nats::push_jobs::SendJob;

/// The payload fields every provider carries for the app.
pub(crate) fn app_data(job: &SendJob) -> serde_json::Value {
    let mut data = serde_json::json!({
        "conversation_id": job.conversation_id,
        "message_id": job.message_id,
        "seq": job.seq.to_string(),
        "sender_id": job.sender,
    });
    // A reaction's push (v1.3): `sender_id` is the reactor.
    if let Some(emoji) = &job.reaction {
        data["reaction"] = serde_json::json!(emoji);
    }
    data
}
