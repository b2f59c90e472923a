//! The OpenAPI document (`GET /v1/openapi.json`), generated.
//!
//! Every documented route is added through [`Api`], which gives the router
//! the handler and the document the route's [`Operation`] in one call, so
//! nothing is served undocumented or documented but not served; the
//! document lists exactly the routes this gateway's configuration turns
//! on. Bodies, parameters and replies are the JSON Schemas (schemars) of
//! the Rust types the handlers take and give, the same types serde reads
//! and writes. The limits the deployment's configuration sets are written
//! into them, so that what the document says a request may hold is what
//! this gateway accepts.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, get, on};
use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value, json};
use switchboard_protocol::error::ErrorBody;

use super::extract::Shared;
use crate::config::GatewayConfig;
use crate::key_directory::MAX_ONE_TIME_PREKEYS;

/// A schema made by the document's generator: a `$ref` to a component for
/// a named type, the schema itself for the rest.
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// `T`'s own schema, never a `$ref` (a query string's fields).
fn inline_schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    T::json_schema(generator)
}

/// Bytes as they are (a component upload, a blob).
fn bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "binary" })
}

/// Text (the Prometheus exposition).
fn text(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string" })
}

/// A JSON document of another specification (OpenAPI, AsyncAPI).
fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object" })
}

#[derive(Debug, Clone, Copy)]
enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
            Verb::Put => MethodFilter::PUT,
            Verb::Patch => MethodFilter::PATCH,
            Verb::Delete => MethodFilter::DELETE,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Post => "post",
            Verb::Put => "put",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

/// Whose credentials an operation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// A tenant's JWT (the document's default security).
    Tenant,
    /// The configuration's `operator_token`.
    Operator,
    /// No credentials (health, the documents, signed blob URLs).
    Anyone,
}

enum Parameter {
    One {
        name: &'static str,
        location: &'static str,
        required: bool,
        description: &'static str,
        schema: SchemaFn,
    },
    /// Every field of a query string's type.
    Fields(SchemaFn),
}

struct Reply {
    status: u16,
    description: &'static str,
    content: Option<(&'static str, SchemaFn)>,
}

/// One operation of the document: what a route takes and answers. Made
/// beside its handler and given to [`Api::route`] with it.
pub(super) struct Operation {
    verb: Verb,
    summary: &'static str,
    description: Option<&'static str>,
    caller: Caller,
    parameters: Vec<Parameter>,
    body: Vec<(&'static str, SchemaFn)>,
    /// Whether the body may be left out ([`super::extract::OptionalJsonBody`]).
    body_optional: bool,
    replies: Vec<Reply>,
    errors: Vec<u16>,
}

impl Operation {
    fn new(verb: Verb, summary: &'static str) -> Self {
        Self {
            verb,
            summary,
            description: None,
            caller: Caller::Tenant,
            parameters: Vec::new(),
            body: Vec::new(),
            body_optional: false,
            replies: Vec::new(),
            errors: Vec::new(),
        }
    }

    pub(super) fn get(summary: &'static str) -> Self {
        Self::new(Verb::Get, summary)
    }

    pub(super) fn post(summary: &'static str) -> Self {
        Self::new(Verb::Post, summary)
    }

    pub(super) fn put(summary: &'static str) -> Self {
        Self::new(Verb::Put, summary)
    }

    pub(super) fn patch(summary: &'static str) -> Self {
        Self::new(Verb::Patch, summary)
    }

    pub(super) fn delete(summary: &'static str) -> Self {
        Self::new(Verb::Delete, summary)
    }

    pub(super) fn describe(mut self, description: &'static str) -> Self {
        self.description = Some(description);
        self
    }

    /// Called with the configuration's operator token, not a tenant's JWT.
    pub(super) fn for_operator(mut self) -> Self {
        self.caller = Caller::Operator;
        self
    }

    /// Called without credentials.
    pub(super) fn for_anyone(mut self) -> Self {
        self.caller = Caller::Anyone;
        self
    }

    /// A path parameter, `{name}` in the route, read as a `T`.
    pub(super) fn path<T: JsonSchema>(
        mut self,
        name: &'static str,
        description: &'static str,
    ) -> Self {
        self.parameters.push(Parameter::One {
            name,
            location: "path",
            required: true,
            description,
            schema: schema_of::<T>,
        });
        self
    }

    /// An optional query parameter read as a `T`.
    pub(super) fn query<T: JsonSchema>(
        mut self,
        name: &'static str,
        description: &'static str,
    ) -> Self {
        self.parameters.push(Parameter::One {
            name,
            location: "query",
            required: false,
            description,
            schema: schema_of::<T>,
        });
        self
    }

    /// The query string as a `T`: one parameter per field.
    pub(super) fn query_fields<T: JsonSchema>(mut self) -> Self {
        self.parameters
            .push(Parameter::Fields(inline_schema_of::<T>));
        self
    }

    /// A JSON body read as a `T`.
    pub(super) fn json_body<T: JsonSchema>(mut self) -> Self {
        self.body.push(("application/json", schema_of::<T>));
        self
    }

    /// A JSON body read as a `T`, which may be left out (then `T`'s
    /// default).
    pub(super) fn optional_json_body<T: JsonSchema>(mut self) -> Self {
        self.body_optional = true;
        self.json_body::<T>()
    }

    /// A body of raw bytes of `content_type`.
    pub(super) fn bytes_body(mut self, content_type: &'static str) -> Self {
        self.body.push((content_type, bytes));
        self
    }

    /// A JSON reply written from a `T`.
    pub(super) fn reply<T: JsonSchema>(mut self, status: u16, description: &'static str) -> Self {
        self.replies.push(Reply {
            status,
            description,
            content: Some(("application/json", schema_of::<T>)),
        });
        self
    }

    /// A reply without a body the document describes.
    pub(super) fn reply_empty(mut self, status: u16, description: &'static str) -> Self {
        self.replies.push(Reply {
            status,
            description,
            content: None,
        });
        self
    }

    /// A reply in the text of `content_type`.
    pub(super) fn reply_text(
        mut self,
        status: u16,
        description: &'static str,
        content_type: &'static str,
    ) -> Self {
        self.replies.push(Reply {
            status,
            description,
            content: Some((content_type, text)),
        });
        self
    }

    /// A reply that is a JSON document of its own specification.
    pub(super) fn reply_document(mut self, description: &'static str) -> Self {
        self.replies.push(Reply {
            status: 200,
            description,
            content: Some(("application/json", any_object)),
        });
        self
    }

    /// Error statuses of this operation beyond those every operation of
    /// its kind has (see [`Operation::error_statuses`]).
    pub(super) fn errors(mut self, statuses: &[u16]) -> Self {
        self.errors.extend_from_slice(statuses);
        self
    }

    /// Every error status the operation may answer with: 403 (an origin
    /// the tenant does not allow), 429 and 503 for all; 401 without valid
    /// credentials; 404 for the operator API where it is off; 400 for
    /// parameters or a body that do not fit, 413 for a body too large;
    /// then the operation's own.
    fn error_statuses(&self) -> Vec<u16> {
        let mut statuses = vec![403, 429, 503];
        if self.caller != Caller::Anyone {
            statuses.push(401);
        }
        if self.caller == Caller::Operator {
            statuses.push(404);
        }
        if !self.parameters.is_empty() || !self.body.is_empty() {
            statuses.push(400);
        }
        if !self.body.is_empty() {
            statuses.push(413);
        }
        statuses.extend(&self.errors);
        statuses.sort_unstable();
        statuses.dedup();
        statuses
    }

    fn to_json(&self, generator: &mut SchemaGenerator) -> Value {
        let mut op = Map::new();
        op.insert("summary".into(), json!(self.summary));
        if let Some(d) = self.description {
            op.insert("description".into(), json!(d));
        }
        match self.caller {
            Caller::Tenant => {}
            Caller::Operator => {
                op.insert("security".into(), json!([{ "operator": [] }]));
            }
            Caller::Anyone => {
                op.insert("security".into(), json!([]));
            }
        }
        let mut parameters = Vec::new();
        for p in &self.parameters {
            match p {
                Parameter::One {
                    name,
                    location,
                    required,
                    description,
                    schema,
                } => parameters.push(json!({
                    "name": name,
                    "in": location,
                    "required": required,
                    "description": description,
                    "schema": made(generator, *schema),
                })),
                Parameter::Fields(schema) => {
                    parameters.extend(query_parameters(&made(generator, *schema)));
                }
            }
        }
        if !parameters.is_empty() {
            op.insert("parameters".into(), Value::Array(parameters));
        }
        if !self.body.is_empty() {
            let content: Map<String, Value> = self
                .body
                .iter()
                .map(|(kind, schema)| {
                    (
                        kind.to_string(),
                        json!({ "schema": made(generator, *schema) }),
                    )
                })
                .collect();
            op.insert(
                "requestBody".into(),
                json!({ "required": !self.body_optional, "content": content }),
            );
        }
        let mut responses = Map::new();
        for status in self.error_statuses() {
            responses.insert(
                status.to_string(),
                json!({ "$ref": "#/components/responses/Error" }),
            );
        }
        // An operation's own description of a status wins over the error.
        for reply in &self.replies {
            let mut r = json!({ "description": reply.description });
            if let Some((kind, schema)) = reply.content {
                r["content"] = json!({ kind: { "schema": made(generator, schema) } });
            }
            responses.insert(reply.status.to_string(), r);
        }
        op.insert("responses".into(), Value::Object(responses));
        Value::Object(op)
    }
}

/// A schema from `schema`, with the document's transforms applied (the
/// generator applies them itself only to the components).
fn made(generator: &mut SchemaGenerator, schema: SchemaFn) -> Value {
    let mut schema = schema(generator);
    RecursiveTransform(bound_integers).transform(&mut schema);
    schema.to_value()
}

/// One query parameter per property of an object schema.
fn query_parameters(object: &Value) -> Vec<Value> {
    let required: Vec<&str> = object["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = object["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, schema)| {
            // An absent parameter is how a query string says `None`.
            let mut schema = schema.clone();
            if let Some(types) = schema.get_mut("type").and_then(Value::as_array_mut) {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    schema["type"] = only.clone();
                }
            }
            let mut p = json!({
                "name": name,
                "in": "query",
                "required": required.contains(&name.as_str()),
                "schema": schema,
            });
            if let Some(d) = schema.get("description") {
                p["description"] = d.clone();
            }
            p
        })
        .collect()
}

/// Integers get the bounds of their Rust type: schemars writes only the
/// minimum of unsigned ones, and a client (or a fuzzer) taking the
/// document at its word would send numbers serde refuses.
fn bound_integers(schema: &mut Schema) {
    let maximum = match schema.get("format").and_then(Value::as_str) {
        Some("uint32") => json!(u32::MAX),
        Some("uint64" | "uint") => json!(u64::MAX),
        _ => return,
    };
    if schema.get("maximum").is_none() {
        schema.insert("maximum".into(), maximum);
    }
}

/// Where the document is served.
const DOCUMENT_PATH: &str = "/v1/openapi.json";

/// Builds the router and the document together: each route added here
/// is served and documented at once.
pub(super) struct Api {
    router: axum::Router<Shared>,
    operations: Vec<(&'static str, Operation)>,
}

impl Api {
    pub(super) fn new() -> Self {
        Self {
            router: axum::Router::new(),
            operations: Vec::new(),
        }
    }

    /// Serves `handler` for `operation`'s method at `path`, and documents it.
    pub(super) fn route<H, T>(
        mut self,
        path: &'static str,
        operation: Operation,
        handler: H,
    ) -> Self
    where
        H: Handler<T, Shared>,
        T: 'static,
    {
        self.router = self
            .router
            .route(path, on(operation.verb.filter(), handler));
        self.operations.push((path, operation));
        self
    }

    /// As [`Api::route`], with a request body limit of the route's own.
    pub(super) fn route_with_body_limit<H, T>(
        mut self,
        path: &'static str,
        operation: Operation,
        limit: DefaultBodyLimit,
        handler: H,
    ) -> Self
    where
        H: Handler<T, Shared>,
        T: 'static,
    {
        self.router = self
            .router
            .route(path, on(operation.verb.filter(), handler).layer(limit));
        self.operations.push((path, operation));
        self
    }

    /// A `GET` route outside the API (the web client's page and scripts):
    /// served, not documented.
    pub(super) fn page<H, T>(mut self, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, Shared>,
        T: 'static,
    {
        self.router = self.router.route(path, get(handler));
        self
    }

    /// The router, with `GET /v1/openapi.json` serving the document of
    /// every route added.
    pub(super) fn finish(self, config: &GatewayConfig) -> axum::Router<Shared> {
        let document = serde_json::to_string_pretty(&self.document(config))
            .unwrap_or_else(|_| "{}".to_owned());
        let document: Arc<str> = document.into();
        self.router
            .route(DOCUMENT_PATH, get(move || serve(document.clone())))
    }

    /// The OpenAPI document of the routes added so far, and of its own
    /// route, which [`Api::finish`] adds.
    pub(super) fn document(&self, config: &GatewayConfig) -> Value {
        let own = Operation::get("This document")
            .for_anyone()
            .reply_document("OpenAPI 3.1, with this deployment's limits.");
        let operations = self
            .operations
            .iter()
            .map(|(path, operation)| (*path, operation))
            .chain([(DOCUMENT_PATH, &own)]);
        let mut generator = SchemaSettings::draft2020_12()
            .with(|s| s.definitions_path = "/components/schemas".into())
            .with_transform(RecursiveTransform(bound_integers))
            .for_deserialize()
            .into_generator();
        let error = generator.subschema_for::<ErrorBody>().to_value();
        let mut paths = Map::new();
        for (path, operation) in operations {
            let item = paths.entry(path.to_string()).or_insert_with(|| json!({}));
            item[operation.verb.key()] = operation.to_json(&mut generator);
        }
        let mut schemas = generator.take_definitions(true);
        write_limits(&mut schemas, config);
        json!({
            "openapi": "3.1.0",
            "info": {
                "title": "Switchboard",
                "version": "1",
                "description": "The REST control plane of Switchboard, generated from the gateway's routes and the Rust types of their bodies (docs/protocol.md). The data plane is the WebSocket at GET /v1/ws, whose frames /v1/asyncapi.json describes. Requests carry a tenant's JWT as `Authorization: Bearer <JWT>`; the operator API the configuration's operator token. Errors are `{code, message}` with the status of their code.",
            },
            "servers": [{ "url": "/" }],
            "security": [{ "bearer": [] }],
            "components": {
                "securitySchemes": {
                    "bearer": {
                        "type": "http",
                        "scheme": "bearer",
                        "bearerFormat": "JWT",
                        "description": "A tenant's token. Claims: tenant, sub (user), device (optional, default \"default\"), exp, role (optional, \"admin\"). HS256 or EdDSA with the tenant's key.",
                    },
                    "operator": {
                        "type": "http",
                        "scheme": "bearer",
                        "description": "The configuration's `operator_token`; without one the operator API is off (404).",
                    },
                },
                "responses": {
                    "Error": {
                        "description": "An error: its code says why.",
                        "content": { "application/json": { "schema": error } },
                    },
                },
                "schemas": schemas,
            },
            "paths": paths,
        })
    }
}

/// Writes the limits of `config` into the components that the limited
/// requests use.
fn write_limits(schemas: &mut Map<String, Value>, config: &GatewayConfig) {
    let limits = &config.limits;
    let mut set = |schema: &str, property: &str, key: &str, value: Value| {
        let field = schemas
            .get_mut(schema)
            .and_then(|s| s.pointer_mut(&format!("/properties/{property}")))
            .and_then(Value::as_object_mut);
        if let Some(field) = field {
            field.insert(key.to_owned(), value);
        }
    };
    set(
        "CreateConversation",
        "title",
        "maxLength",
        json!(limits.max_title_chars),
    );
    for body in ["CreateConversation", "AddMembers"] {
        set(
            body,
            "members",
            "maxItems",
            json!(limits.max_members_per_request),
        );
    }
    set(
        "UploadRequest",
        "size",
        "maximum",
        json!(config.media.max_bytes),
    );
    set(
        "UploadRequest",
        "mime",
        "pattern",
        json!(mime_pattern(&config.media.allowed_mime)),
    );
    set(
        "ReplayRequest",
        "limit",
        "maximum",
        json!(limits.plugin_replay_max_messages),
    );
    set(
        "DeviceKeysUpload",
        "one_time_prekeys",
        "maxItems",
        json!(MAX_ONE_TIME_PREKEYS),
    );
}

/// The handler of a JSON document made once.
pub(super) async fn serve(document: Arc<str>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.to_string(),
    )
        .into_response()
}

/// A character of a MIME type token.
const TOKEN: &str = "[A-Za-z0-9!#$&^_.+-]";

/// `s` matched without regard to ASCII case (the gateway lowercases
/// types before checking them); other characters escaped.
fn any_case(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
            } else if ".+*?^$()[]{}|\\".contains(c) {
                format!("\\{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The types `allowed` lets through, as one pattern: `image/` any image
/// subtype, anything else that exact type.
fn mime_pattern(allowed: &[String]) -> String {
    let alternatives: Vec<String> = allowed
        .iter()
        .map(|a| match a.strip_suffix('/') {
            Some(kind) => format!("{}/{TOKEN}+", any_case(kind)),
            None => any_case(a),
        })
        .collect();
    format!("^({})$", alternatives.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mime_pattern_is_the_allow_list() {
        let pattern = mime_pattern(&["image/".to_owned(), "application/pdf".to_owned()]);
        assert_eq!(
            pattern,
            "^([iI][mM][aA][gG][eE]/[A-Za-z0-9!#$&^_.+-]+|[aA][pP][pP][lL][iI][cC][aA][tT][iI][oO][nN]/[pP][dD][fF])$"
        );
    }

    #[test]
    fn unsigned_integers_get_their_types_maximum() {
        let mut generator = SchemaSettings::draft2020_12().into_generator();
        let mut generated = |f: SchemaFn| made(&mut generator, f);
        assert_eq!(generated(schema_of::<u32>)["maximum"], json!(u32::MAX));
        assert_eq!(generated(schema_of::<u64>)["maximum"], json!(u64::MAX));
        assert_eq!(generated(schema_of::<u16>)["maximum"], json!(u16::MAX));
    }
}
