//! The fuzz targets: each is the function that first meets bytes from
//! outside, called as the server calls it, with seeds that reach its
//! branches and the most it may allocate for one input.
//!
//! Three kinds of outside: what strangers send (`edge.rs`), what the
//! backbone's buckets and object stores hold (`records.rs`) and what
//! travels on its subjects (`messages.rs`). The backbone is outside too:
//! any process with write access to it could be compromised (issue 26),
//! so no size, length or count read from it may size an allocation.

mod edge;
mod input;
mod messages;
mod records;

pub struct Target {
    pub name: &'static str,
    /// Valid (and nearly valid) inputs to mutate.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Calls the code under test; panicking is the failure looked for.
    pub run: fn(&[u8]),
    /// Largest input to make: what reaches this code at most.
    pub max_input: usize,
    /// Most bytes one call may allocate for an input of `len` bytes.
    pub alloc_limit: fn(len: usize) -> usize,
}

/// The limit of a decoder: what it builds is bounded by the bytes it was
/// given (64 times them, for the pointers and padding of what they decode
/// into), never by a size, length or count they claim.
pub fn in_proportion(len: usize) -> usize {
    64 * len + (1 << 20)
}

pub const TARGETS: &[Target] = &[
    Target {
        name: "client_frame",
        seeds: edge::frame_seeds,
        run: edge::client_frame,
        // Larger frames are refused before parsing (`max_frame_bytes`).
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "content",
        seeds: edge::content_seeds,
        run: edge::content,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "jwt",
        seeds: edge::jwt_seeds,
        run: edge::jwt,
        // Tokens come in a header or a query string.
        max_input: 16 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "plugin_upload",
        seeds: edge::plugin_seeds,
        run: edge::plugin_upload,
        max_input: 64 * 1024,
        alloc_limit: |len| 4 * len + (64 << 10),
    },
    Target {
        name: "archive_object",
        seeds: edge::archive_seeds,
        run: edge::archive_object,
        max_input: 64 * 1024,
        // An object may decompress to the documented maximum; its JSON
        // is parsed once.
        alloc_limit: |_| 3 * switchboard_store::archive::MAX_OBJECT_BYTES as usize,
    },
    Target {
        name: "tenant_record",
        seeds: records::tenant_seeds,
        run: records::tenant_record,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "push_tokens",
        seeds: records::push_token_seeds,
        run: records::push_tokens,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "presence_key",
        seeds: records::presence_key_seeds,
        run: records::presence_key,
        // NATS keys are short; a long one costs no more per byte.
        max_input: 4 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "last_seen",
        seeds: records::last_seen_seeds,
        run: records::last_seen,
        max_input: 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "refusal",
        seeds: records::refusal_seeds,
        run: records::refusal,
        max_input: 16 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "erasure",
        seeds: records::erasure_seeds,
        run: records::erasure,
        max_input: 16 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "device_keys",
        seeds: records::device_key_seeds,
        run: records::device_keys,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "plugin_record",
        seeds: records::plugin_record_seeds,
        run: records::plugin_record,
        max_input: 64 * 1024,
        // The record's `size` is believed up to max_component_bytes (the
        // read reserves what it claims within that bound), never past it.
        alloc_limit: |len| records::MAX_COMPONENT_BYTES + in_proportion(len),
    },
    Target {
        name: "compiled_artifact",
        seeds: records::compiled_artifact_seeds,
        run: records::compiled_artifact,
        max_input: 64 * 1024,
        // Only the seed that is a whole artifact reaches wasmtime, which
        // maps its (empty) component; every other input stops at the
        // header or the SHA-256.
        alloc_limit: |len| in_proportion(len) + (4 << 20),
    },
    Target {
        name: "collapse_mark",
        seeds: records::collapse_mark_seeds,
        run: records::collapse_mark,
        max_input: 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "ingest_commands",
        seeds: messages::ingest_seeds,
        run: messages::ingest_commands,
        // A message of several sends is at most `ingest_batch_max_bytes`;
        // mutations make longer ones.
        max_input: 256 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "command_reply",
        seeds: messages::command_reply_seeds,
        run: messages::command_reply,
        max_input: 16 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "event",
        seeds: messages::event_seeds,
        run: messages::event,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "delivery",
        seeds: messages::delivery_seeds,
        run: messages::delivery,
        // A delivery is published at `DELIVERY_MAX_BYTES` (256 KiB), or
        // larger with one large event.
        max_input: 256 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "push_job",
        seeds: messages::push_job_seeds,
        run: messages::push_job,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "store_request",
        seeds: messages::store_request_seeds,
        run: messages::store_request,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
    Target {
        name: "store_reply",
        seeds: messages::store_reply_seeds,
        run: messages::store_reply,
        max_input: 64 * 1024,
        alloc_limit: in_proportion,
    },
];

pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
