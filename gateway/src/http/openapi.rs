//! `GET /v1/openapi.json`: the OpenAPI document as served, `openapi.json`
//! with the constraints this deployment's configuration sets written in,
//! so that what it says a request may hold is exactly what this gateway
//! accepts.

use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::config::GatewayConfig;

/// The handler, given the document made once when the router is.
pub(super) async fn serve(document: Arc<str>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.to_string(),
    )
        .into_response()
}

/// The document for `config`, as JSON text.
pub(super) fn document(config: &GatewayConfig) -> String {
    let base = include_str!("../../openapi.json");
    let Ok(mut doc) = serde_json::from_str::<Value>(base) else {
        // Checked by a test; served as it is rather than not at all.
        return base.to_owned();
    };
    let limits = &config.limits;
    // Sets `key` of the schema at `pointer` (which the base document has).
    let set = |doc: &mut Value, pointer: &str, value: Value| {
        let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
        if let Some(Value::Object(schema)) = doc.pointer_mut(parent) {
            schema.insert(key.to_owned(), value);
        }
    };
    let body = |path: &str, method: &str| {
        format!(
            "/paths/{}/{method}/requestBody/content/application~1json/schema/properties",
            path.replace('~', "~0").replace('/', "~1")
        )
    };
    let create = body("/v1/conversations", "post");
    set(
        &mut doc,
        &format!("{create}/title/maxLength"),
        json!(limits.max_title_chars),
    );
    set(
        &mut doc,
        &format!("{create}/members/maxItems"),
        json!(limits.max_members_per_request),
    );
    let add = body("/v1/conversations/{id}/members", "post");
    set(
        &mut doc,
        &format!("{add}/members/maxItems"),
        json!(limits.max_members_per_request),
    );
    let media = body("/v1/media", "post");
    set(
        &mut doc,
        &format!("{media}/size/maximum"),
        json!(config.media.max_bytes),
    );
    set(
        &mut doc,
        &format!("{media}/mime/pattern"),
        json!(mime_pattern(&config.media.allowed_mime)),
    );
    serde_json::to_string_pretty(&doc).unwrap_or_else(|_| base.to_owned())
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
    fn the_document_parses_and_carries_the_configured_limits() {
        let mut config = GatewayConfig::new("g".into(), Vec::new());
        config.limits.max_title_chars = 77;
        config.media.max_bytes = 1234;
        let doc: Value = serde_json::from_str(&document(&config)).unwrap_or_default();
        let create = "/paths/~1v1~1conversations/post/requestBody/content/application~1json/schema/properties";
        assert_eq!(
            doc.pointer(&format!("{create}/title/maxLength")),
            Some(&json!(77))
        );
        let media =
            "/paths/~1v1~1media/post/requestBody/content/application~1json/schema/properties";
        assert_eq!(
            doc.pointer(&format!("{media}/size/maximum")),
            Some(&json!(1234))
        );
    }

    #[test]
    fn the_mime_pattern_is_the_allow_list() {
        let pattern = mime_pattern(&["image/".to_owned(), "application/pdf".to_owned()]);
        assert_eq!(
            pattern,
            "^([iI][mM][aA][gG][eE]/[A-Za-z0-9!#$&^_.+-]+|[aA][pP][pP][lL][iI][cC][aA][tT][iI][oO][nN]/[pP][dD][fF])$"
        );
    }
}
