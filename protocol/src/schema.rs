//! The client contract as machine-readable documents, generated from
//! this crate's types (feature `schema`):
//! - `schema/frames.schema.json`: JSON Schema (2020-12) of every frame,
//!   `ClientFrame` and `ServerFrame`, with every type they use;
//! - `schema/asyncapi.json`: an AsyncAPI 3 document of `/v1/ws`, whose
//!   messages are those schemas.
//!
//! Both files are checked in (clients and the SDK's types are built from
//! them) and a test fails when they differ from what the types generate:
//! `SWITCHBOARD_BLESS=1 cargo test -p switchboard-protocol --features
//! schema` rewrites them. Gateways serve the AsyncAPI document as it is
//! ([`crate::ASYNCAPI_JSON`]).
//!
//! One contract for both directions: each schema says what a reader of
//! the frame must accept, so a field with a default may be absent.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde_json::{Value, json};

use crate::frames::{ClientFrame, ServerFrame};
use crate::ids::{
    ClientMsgId, ConversationId, DeviceId, MAX_CLIENT_MSG_ID_LEN, MAX_ID_LEN, MessageId, TenantId,
    UserId,
};
use crate::timestamp::Timestamp;

/// Where the JSON Schema document says it lives.
pub const FRAMES_SCHEMA_ID: &str = "https://switchboard.invalid/schema/frames.schema.json";

/// The JSON Schema of every frame: `$defs` holds `ClientFrame`,
/// `ServerFrame` and every type they use.
pub fn frames_schema() -> Value {
    let defs = definitions("/$defs");
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": FRAMES_SCHEMA_ID,
        "title": "Switchboard WebSocket frames",
        "description": "Every frame of /v1/ws: one JSON object per text frame, tagged by `type`. A client sends a ClientFrame and receives ServerFrames.",
        "oneOf": [
            { "$ref": "#/$defs/ClientFrame" },
            { "$ref": "#/$defs/ServerFrame" }
        ],
        "$defs": defs,
    })
}

/// The AsyncAPI 3 document of `/v1/ws`.
pub fn asyncapi() -> Value {
    let mut schemas = definitions("/components/schemas");
    schemas.values_mut().for_each(refs_alone);
    let client = frame_messages(&schemas, "ClientFrame", "client");
    let server = frame_messages(&schemas, "ServerFrame", "server");
    let refs = |names: &[String]| -> Vec<Value> {
        names
            .iter()
            .map(|n| json!({ "$ref": format!("#/channels/ws/messages/{n}") }))
            .collect()
    };
    let mut messages = serde_json::Map::new();
    for (name, message) in client.iter().chain(server.iter()) {
        messages.insert(name.clone(), message.clone());
    }
    let client_names: Vec<String> = client.iter().map(|(n, _)| n.clone()).collect();
    let server_names: Vec<String> = server.iter().map(|(n, _)| n.clone()).collect();
    json!({
        "asyncapi": "3.0.0",
        "info": {
            "title": "Switchboard WebSocket API",
            "version": "1",
            "description": "The live half of the client contract (the REST half is /v1/openapi.json). Connect to /v1/ws with a token (`?token=<JWT>` or `Authorization: Bearer <JWT>`). Once the upgrade is answered the session is live: every message stored from then on reaches it. One JSON object per text frame, tagged by `type`."
        },
        "defaultContentType": "application/json",
        "channels": {
            "ws": {
                "address": "/v1/ws",
                "title": "A client's WebSocket session",
                "bindings": { "ws": { "method": "GET", "query": {
                    "type": "object",
                    "properties": { "token": { "type": "string", "description": "The session's JWT, when not in an Authorization header." } }
                } } },
                "messages": messages,
            }
        },
        "operations": {
            "clientSends": {
                "action": "receive",
                "title": "Frames the client sends",
                "channel": { "$ref": "#/channels/ws" },
                "messages": refs(&client_names),
            },
            "serverSends": {
                "action": "send",
                "title": "Frames the server sends",
                "channel": { "$ref": "#/channels/ws" },
                "messages": refs(&server_names),
            }
        },
        "components": { "schemas": schemas },
    })
}

/// One AsyncAPI message per variant of a frame enum (`name` in
/// `schemas`), named by its `type`, with the variant's schema as payload;
/// keyed `<side>_<type>`, since both sides have a `typing` frame.
fn frame_messages(
    schemas: &serde_json::Map<String, Value>,
    name: &str,
    side: &str,
) -> Vec<(String, Value)> {
    let variants = schemas
        .get(name)
        .and_then(|s| s.get("oneOf"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    variants
        .into_iter()
        .filter_map(|variant| {
            let kind = variant
                .pointer("/properties/type/const")
                .and_then(Value::as_str)?
                .to_owned();
            let mut payload = variant;
            refs_alone(&mut payload);
            let mut message = json!({
                "name": kind,
                "title": kind,
                "payload": payload,
            });
            if let Some(d) = message.pointer("/payload/description").cloned() {
                message["summary"] = d;
            }
            Some((format!("{side}_{kind}"), message))
        })
        .collect()
}

/// Moves every `$ref` that has sibling keywords into an `allOf`: AsyncAPI's
/// schemas are JSON Schema draft 07, where a `$ref`'s siblings are
/// ignored, so `{"$ref": A, "required": [..]}` would lose the `required`
/// (2020-12, the frames schema's draft, keeps them as they are).
fn refs_alone(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.len() > 1
                && let Some(target) = map.remove("$ref")
            {
                let all_of = map
                    .entry("allOf")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(parts) = all_of {
                    parts.insert(0, json!({ "$ref": target }));
                }
            }
            map.values_mut().for_each(refs_alone);
        }
        Value::Array(items) => items.iter_mut().for_each(refs_alone),
        _ => {}
    }
}

/// One type's own schema, as readers of it must take it (for the tests
/// that hold hand-written documents to the types: the gateway's OpenAPI
/// bodies).
pub fn schema_of<T: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .root_schema_for::<T>()
        .to_value()
}

/// Every type of the frames, with references to `path`.
fn definitions(path: &str) -> serde_json::Map<String, Value> {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = path.to_owned().into())
        .for_deserialize()
        .into_generator();
    let client = generator.subschema_for::<ClientFrame>();
    let server = generator.subschema_for::<ServerFrame>();
    debug_assert!(client.get("$ref").is_some() && server.get("$ref").is_some());
    generator.take_definitions(true)
}

/// A tenant, user, device or conversation id.
fn string_id(description: &str) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_ID_LEN,
        "pattern": "^[A-Za-z0-9._:@-]+$",
        "description": description,
    })
}

macro_rules! id_schema {
    ($name:ident, $description:literal) => {
        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                string_id($description)
            }
        }
    };
}

id_schema!(TenantId, "A tenant: 1-128 characters of [A-Za-z0-9._:@-].");
id_schema!(
    UserId,
    "A user, unique within a tenant: 1-128 characters of [A-Za-z0-9._:@-]."
);
id_schema!(
    DeviceId,
    "A device of a user (the token's `device` claim, default `default`): 1-128 characters of [A-Za-z0-9._:@-]."
);
id_schema!(
    ConversationId,
    "A conversation, unique within a tenant: 1-128 characters of [A-Za-z0-9._:@-]."
);

impl JsonSchema for ClientMsgId {
    fn schema_name() -> Cow<'static, str> {
        "ClientMsgId".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_CLIENT_MSG_ID_LEN,
            // Control characters as ranges, not `\p{Cc}`: the schema
            // tools that generate requests (schemathesis) have no Unicode
            // classes.
            "pattern": "^[^\\s\\x00-\\x1f\\x7f-\\x9f]+$",
            "description": "The sender's idempotency key for one message: 1-128 printable characters, no whitespace.",
        })
    }
}

/// The decimal strings `MessageId` parses: up to 20 digits (leading
/// zeros allowed) of a value that fits 64 bits. Anything of 19 digits or
/// fewer fits; a 20-digit one fits when it starts with 0, or when it is at
/// most 18446744073709551615, spelled out one leading digit at a time.
pub const MESSAGE_ID_PATTERN: &str = "^(?:[0-9]{1,19}|0[0-9]{19}|1[0-7][0-9]{18}|18[0-3][0-9]{17}\
    |184[0-3][0-9]{16}|1844[0-5][0-9]{15}|18446[0-6][0-9]{14}|184467[0-3][0-9]{13}\
    |1844674[0-3][0-9]{12}|184467440[0-6][0-9]{10}|1844674407[0-2][0-9]{9}\
    |18446744073[0-6][0-9]{8}|1844674407370[0-8][0-9]{6}|18446744073709[0-4][0-9]{5}\
    |184467440737095[0-4][0-9]{4}|18446744073709550[0-9]{3}|18446744073709551[0-5][0-9]{2}\
    |1844674407370955160[0-9]|1844674407370955161[0-4]|18446744073709551615)$";

impl JsonSchema for MessageId {
    fn schema_name() -> Cow<'static, str> {
        "MessageId".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": MESSAGE_ID_PATTERN,
            "description": "A Snowflake message id: a 64-bit integer as a decimal string (JavaScript numbers cannot hold it).",
        })
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "An RFC 3339 time in UTC with milliseconds, e.g. 2026-05-22T09:21:41.123Z.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in documents are what the types generate; with
    /// `SWITCHBOARD_BLESS=1` they are rewritten instead.
    #[test]
    fn the_schema_files_are_generated_from_the_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
        let bless = std::env::var_os("SWITCHBOARD_BLESS").is_some();
        for (file, document) in [
            ("frames.schema.json", frames_schema()),
            ("asyncapi.json", asyncapi()),
        ] {
            let path = dir.join(file);
            let generated = serde_json::to_string_pretty(&document).unwrap() + "\n";
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &generated).unwrap();
                continue;
            }
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == generated,
                "{} is out of date: run SWITCHBOARD_BLESS=1 cargo test -p switchboard-protocol --features schema",
                path.display()
            );
        }
    }

    #[test]
    fn every_frame_type_is_a_message() {
        let doc = asyncapi();
        let messages = doc["channels"]["ws"]["messages"].as_object().unwrap();
        for t in crate::frames::request_type::ALL {
            assert!(
                messages.contains_key(&format!("client_{t}")),
                "client frame {t}"
            );
        }
        let server = crate::frames::SERVER_FRAME_TYPES;
        for t in server {
            assert!(
                messages.contains_key(&format!("server_{t}")),
                "server frame {t}"
            );
        }
        assert_eq!(
            messages.len(),
            crate::frames::request_type::ALL.len() + server.len()
        );
    }

    /// Draft 07 (AsyncAPI's schemas) ignores a `$ref`'s siblings: none has
    /// any, and what they said is kept beside the reference.
    #[test]
    fn asyncapi_refs_stand_alone() {
        fn check(v: &Value, at: &str) {
            match v {
                Value::Object(map) => {
                    assert!(
                        !(map.contains_key("$ref") && map.len() > 1),
                        "{at} has a $ref with siblings"
                    );
                    map.iter().for_each(|(k, v)| check(v, &format!("{at}/{k}")));
                }
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .for_each(|(i, v)| check(v, &format!("{at}/{i}"))),
                _ => {}
            }
        }
        let doc = asyncapi();
        check(&doc, "");
        let status = &doc["components"]["schemas"]["SendAck"]["properties"]["status"];
        assert_eq!(status["allOf"][0]["$ref"], "#/components/schemas/AckStatus");
        assert!(status["description"].is_string());
    }
}
