//! HTTP routes: the REST control plane, the WebSocket upgrade, health.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use switchboard_backbone::envelope::{
    Command, CommandReply, CreateConversationCommand, MembersCommand, direct_conversation_id,
};
use switchboard_protocol::conversation::{
    AddMembers, ConversationList, CreateConversation, HistoryPage, Members,
};
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, ConversationView, ErrorCode, MemberView, Message,
    Timestamp, UserId,
};
use switchboard_store::{ConversationDetail, ConversationSummary, HistoryQuery};
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::auth::{AuthError, Identity};
use crate::error::ApiError;
use crate::{Gateway, connection};

type Shared = Arc<Gateway>;

pub(crate) fn router(gw: Shared) -> axum::Router {
    let body_limit = gw.config.limits.max_body_bytes;
    let document: Arc<str> = crate::openapi::document(&gw.config).into();
    // The longest pause between two chunks of a request body.
    let body_timeout = Duration::from_millis(gw.config.limits.http_body_timeout_ms.max(1));
    let mut router = axum::Router::new()
        .route("/v1/ws", get(websocket))
        .route(
            "/v1/conversations",
            post(create_conversation).get(list_conversations),
        )
        .route("/v1/conversations/{id}", get(get_conversation))
        .route("/v1/conversations/{id}/members", post(add_members))
        .route(
            "/v1/conversations/{id}/members/{user}",
            delete(remove_member),
        )
        .route("/v1/conversations/{id}/messages", get(history))
        .route(
            "/v1/conversations/{id}/messages/{message_id}/versions",
            get(versions),
        )
        .route("/v1/users/{user}/presence", get(presence))
        .route("/v1/openapi.json", get(move || openapi(document.clone())))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(crate::plugin_api::routes(&gw))
        .merge(crate::media::routes(&gw))
        .merge(crate::keys::routes())
        .merge(crate::operator::routes())
        .merge(crate::push::routes());
    if gw.config.serve_web_client {
        router = router.route("/", get(web_client));
    }
    if gw.config.dev_tokens.is_some() {
        router = router.route("/v1/dev/token", post(dev_token));
    }
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .layer(axum::middleware::from_fn_with_state(
            gw.clone(),
            crate::browser::guard,
        ))
        .with_state(gw)
}

fn auth_error(e: AuthError) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, e.to_string())
}

pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
}

impl FromRequestParts<Shared> for Identity {
    type Rejection = ApiError;

    /// Verifies the token, then takes the request from its user's rate.
    async fn from_request_parts(parts: &mut Parts, gw: &Shared) -> Result<Self, ApiError> {
        let token = bearer(&parts.headers).ok_or_else(|| auth_error(AuthError::Missing))?;
        let id = gw.tenants.verify(token).map_err(auth_error)?;
        let limits = &gw.config.limits;
        let user = (id.tenant.clone(), id.user.clone());
        let (rate, burst) = (limits.rest_requests_per_second, limits.rest_request_burst);
        if !gw.quotas.requests.take(&user, rate, burst, 1.0) {
            return Err(ApiError::new(
                ErrorCode::RateLimited,
                format!("more than {rate} requests per second from this user; slow down and retry"),
            ));
        }
        Ok(id)
    }
}

/// A JSON body whose rejections are protocol errors.
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let Json(mut value) = Json::<serde_json::Value>::from_request(req, state)
            .await
            .map_err(json_rejection)?;
        integral_floats_to_integers(&mut value);
        serde_json::from_value(value)
            .map(Self)
            .map_err(|e| ApiError::invalid(format!("the JSON body does not fit: {e}")))
    }
}

/// `3.0` is the integer 3 to JSON Schema (and so to the OpenAPI document
/// and its clients' generators), while serde's integer types refuse it:
/// such numbers are read as the integers they are.
fn integral_floats_to_integers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.007_199_254_740_992e15
            {
                // Exact below 2^53: every such float is an integer.
                *value = serde_json::Value::from(f as i64);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        serde_json::Value::Object(fields) => {
            fields.values_mut().for_each(integral_floats_to_integers)
        }
        _ => {}
    }
}

fn json_rejection(e: JsonRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(ErrorCode::TooLarge, "request body over the size limit")
    } else {
        ApiError::invalid(e.body_text())
    }
}

fn conversation_id(raw: Result<Path<String>, PathRejection>) -> Result<ConversationId, ApiError> {
    let Path(raw) = raw.map_err(|e| ApiError::invalid(e.body_text()))?;
    ConversationId::new(raw).map_err(|e| ApiError::invalid(e.to_string()))
}

fn member_views(d: &ConversationDetail) -> Vec<MemberView> {
    d.members
        .iter()
        .map(|m| MemberView {
            user_id: m.user_id.clone(),
            delivered_seq: m.delivered_seq,
            read_seq: m.read_seq,
        })
        .collect()
}

fn detail_view(d: ConversationDetail, caller: &UserId) -> ConversationView {
    let read = d
        .members
        .iter()
        .find(|m| &m.user_id == caller)
        .map_or(0, |m| m.read_seq);
    let members = Members::Detailed(member_views(&d));
    let r = d.record;
    ConversationView {
        unread_count: r.last_seq.saturating_sub(read),
        conversation_id: r.conversation_id,
        kind: r.kind,
        title: r.title,
        members,
        created_at: r.created_at,
        last_seq: r.last_seq,
        preview: preview(r.last_message.as_ref()),
        last_message: r.last_message,
    }
}

/// None for a deleted message (no content) and ciphertext.
fn preview(last: Option<&Message>) -> Option<String> {
    last.and_then(|m| m.content.as_ref())
        .and_then(Content::preview)
}

fn summary_view(s: ConversationSummary) -> ConversationView {
    let r = s.record;
    ConversationView {
        unread_count: r.last_seq.saturating_sub(s.me.read_seq),
        conversation_id: r.conversation_id,
        kind: r.kind,
        title: r.title,
        members: Members::Ids(s.member_ids),
        created_at: r.created_at,
        last_seq: r.last_seq,
        preview: preview(r.last_message.as_ref()),
        last_message: r.last_message,
    }
}

fn refused(reply: CommandReply) -> Result<bool, ApiError> {
    match reply {
        CommandReply::Done { created, .. } => Ok(created),
        CommandReply::Refused { code, message } => Err(ApiError::new(code, message)),
    }
}

async fn create_conversation(
    State(gw): State<Shared>,
    id: Identity,
    JsonBody(body): JsonBody<CreateConversation>,
) -> Result<(StatusCode, Json<ConversationView>), ApiError> {
    let limits = &gw.config.limits;
    // Characters, as JSON Schema's maxLength counts them.
    if body
        .title
        .as_ref()
        .is_some_and(|t| t.chars().count() > limits.max_title_chars)
    {
        // A field over its documented length: invalid, as the schema
        // says; 413 is for bodies over the byte limit.
        return Err(ApiError::invalid(format!(
            "title is over {} characters",
            limits.max_title_chars
        )));
    }
    if body.members.len() > limits.max_members_per_request {
        return Err(ApiError::invalid(format!(
            "at most {} members per request",
            limits.max_members_per_request
        )));
    }
    gw.take_members_added(&id, body.members.len())?;
    let mut members: BTreeSet<UserId> = body.members.into_iter().collect();
    members.insert(id.user.clone());
    let conversation_id = match body.kind {
        ConversationKind::Direct => {
            let others: Vec<&UserId> = members.iter().filter(|m| **m != id.user).collect();
            let [other] = others.as_slice() else {
                return Err(ApiError::invalid(
                    "a direct conversation has exactly one member besides the caller",
                ));
            };
            direct_conversation_id(&id.user, other)
                .ok_or_else(|| ApiError::new(ErrorCode::Internal, "direct conversation id"))?
        }
        ConversationKind::Group | ConversationKind::Channel => {
            let n = gw
                .ids
                .next_id()
                .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?;
            ConversationId::new(format!("c:{n}"))
                .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?
        }
    };
    let command_id = gw
        .ids
        .next_id()
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?;
    let reply = gw
        .run_command(Command::CreateConversation(CreateConversationCommand {
            command_id,
            tenant: id.tenant.clone(),
            conversation_id: conversation_id.clone(),
            kind: body.kind,
            title: body.title,
            members: members.into_iter().collect(),
            actor: id.user.clone(),
            device: id.device.clone(),
            at: Timestamp::now(),
        }))
        .await?;
    let created = refused(reply)?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation_id, &id.user)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(detail_view(detail, &id.user))))
}

async fn list_conversations(
    State(gw): State<Shared>,
    id: Identity,
) -> Result<Json<ConversationList>, ApiError> {
    let list = gw.store.conversations_of(&id.tenant, &id.user).await?;
    Ok(Json(ConversationList {
        conversations: list.into_iter().map(summary_view).collect(),
    }))
}

async fn get_conversation(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<ConversationView>, ApiError> {
    let conversation = conversation_id(path)?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    Ok(Json(detail_view(detail, &id.user)))
}

async fn members_command(
    gw: &Gateway,
    id: &Identity,
    conversation: ConversationId,
    users: Vec<UserId>,
    add: bool,
) -> Result<(), ApiError> {
    let command = MembersCommand {
        command_id: gw
            .ids
            .next_id()
            .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?,
        tenant: id.tenant.clone(),
        conversation_id: conversation,
        users,
        actor: id.user.clone(),
        device: id.device.clone(),
        actor_is_admin: id.admin,
        at: Timestamp::now(),
    };
    let command = if add {
        Command::AddMembers(command)
    } else {
        Command::RemoveMembers(command)
    };
    refused(gw.run_command(command).await?)?;
    Ok(())
}

async fn add_members(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<AddMembers>,
) -> Result<Json<ConversationView>, ApiError> {
    let conversation = conversation_id(path)?;
    // The limit is on the list, as the OpenAPI document says (`maxItems`);
    // `user_id` adds one.
    let listed = body.members.len();
    let mut users = body.members;
    users.extend(body.user_id);
    if users.is_empty() {
        return Err(ApiError::invalid(
            "give \"members\": [user ids] or \"user_id\"",
        ));
    }
    if listed > gw.config.limits.max_members_per_request {
        return Err(ApiError::invalid(format!(
            "at most {} members per request",
            gw.config.limits.max_members_per_request
        )));
    }
    gw.take_members_added(&id, users.len())?;
    members_command(&gw, &id, conversation.clone(), users, true).await?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    Ok(Json(detail_view(detail, &id.user)))
}

async fn remove_member(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path((conversation, user)) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let conversation =
        ConversationId::new(conversation).map_err(|e| ApiError::invalid(e.to_string()))?;
    let user = UserId::new(user).map_err(|e| ApiError::invalid(e.to_string()))?;
    members_command(&gw, &id, conversation, vec![user], false).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct HistoryParams {
    before_seq: Option<u64>,
    after_seq: Option<u64>,
    limit: Option<usize>,
}

/// Default and largest page of `GET .../messages` (PROTOCOL.md).
const HISTORY_DEFAULT_LIMIT: usize = 50;
const HISTORY_MAX_LIMIT: usize = 200;

async fn history(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
    params: Result<Query<HistoryParams>, QueryRejection>,
) -> Result<Json<HistoryPage>, ApiError> {
    let conversation = conversation_id(path)?;
    let Query(params) = params.map_err(|e| ApiError::invalid(e.body_text()))?;
    let limit = params
        .limit
        .unwrap_or(HISTORY_DEFAULT_LIMIT)
        .clamp(1, HISTORY_MAX_LIMIT);
    let query = HistoryQuery {
        before_seq: params.before_seq,
        after_seq: params.after_seq,
        limit,
    };
    let messages = gw
        .store
        .history(&id.tenant, &conversation, &id.user, query)
        .await?;
    let floor = params.after_seq.unwrap_or(0).saturating_add(1);
    let next_before_seq = match messages.last() {
        Some(oldest) if messages.len() == limit && oldest.seq > floor => Some(oldest.seq),
        _ => None,
    };
    Ok(Json(HistoryPage {
        messages,
        next_before_seq,
    }))
}

/// Presence of oneself or of a direct contact: the same scope the
/// `presence` frames have.
async fn presence(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<switchboard_protocol::PresenceInfo>, ApiError> {
    let Path(raw) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let user = UserId::new(raw).map_err(|e| ApiError::invalid(e.to_string()))?;
    if user != id.user
        && !gw
            .store
            .contacts(&id.tenant, &id.user)
            .await?
            .contains(&user)
    {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "presence is visible to the user's direct contacts only",
        ));
    }
    Ok(Json(gw.hub.presence().lookup(&id.tenant, &user).await))
}

/// Every version of an edited message, the original first (none for a
/// message never edited, or deleted).
async fn versions(
    State(gw): State<Shared>,
    id: Identity,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<switchboard_protocol::MessageVersions>, ApiError> {
    let Path((conversation, message)) = path.map_err(|e| ApiError::invalid(e.body_text()))?;
    let conversation =
        ConversationId::new(conversation).map_err(|e| ApiError::invalid(e.to_string()))?;
    let message_id: switchboard_protocol::MessageId = message
        .parse()
        .map_err(|e: switchboard_protocol::IdError| ApiError::invalid(e.to_string()))?;
    let versions = gw
        .store
        .versions(&id.tenant, &conversation, &id.user, message_id)
        .await?;
    Ok(Json(switchboard_protocol::MessageVersions {
        message_id,
        versions,
    }))
}

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

async fn websocket(
    State(gw): State<Shared>,
    headers: HeaderMap,
    query: Result<Query<TokenQuery>, QueryRejection>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let from_query = query.ok().and_then(|Query(q)| q.token);
    let token = bearer(&headers).map(str::to_owned).or(from_query);
    let Some(token) = token else {
        return auth_error(AuthError::Missing).into_response();
    };
    let identity = match gw.tenants.verify(&token) {
        Ok(i) => i,
        Err(e) => return auth_error(e).into_response(),
    };
    if gw.is_draining() {
        return ApiError::new(
            ErrorCode::Unavailable,
            "this gateway is shutting down; connect to another".to_owned(),
        )
        .into_response();
    }
    let admission = match gw
        .quotas
        .admit(&identity, gw.config.limits.max_connections_per_user)
    {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    // Subscribed before the upgrade is answered: see `connection::Session`.
    let session = match connection::prepare(&gw, &identity).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "connection refused: backbone or store unavailable");
            return ApiError::new(ErrorCode::Unavailable, e).into_response();
        }
    };
    let limits = &gw.config.limits;
    upgrade
        .read_buffer_size(4 * 1024)
        .write_buffer_size(8 * 1024)
        .max_message_size(limits.hard_max_frame_bytes)
        .max_frame_size(limits.hard_max_frame_bytes)
        .on_upgrade(move |socket| connection::run(identity, token, socket, session, admission))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Ready when NATS is connected and the store answers.
async fn readyz(State(gw): State<Shared>) -> (StatusCode, Json<serde_json::Value>) {
    let nats = gw.client.connection_state() == async_nats::connection::State::Connected;
    let store = matches!(
        tokio::time::timeout(Duration::from_secs(2), gw.store.ping()).await,
        Ok(Ok(()))
    );
    let draining = gw.is_draining();
    let ready = nats && store && !draining;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if draining { "draining" } else if ready { "ready" } else { "unavailable" },
        "nats": if nats { "connected" } else { "disconnected" },
        "store": if store { "ok" } else { "unavailable" },
    });
    (status, Json(body))
}

async fn openapi(document: Arc<str>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.to_string(),
    )
        .into_response()
}

async fn web_client() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // The page's own inline script and style, and its own origin's
            // API and WebSocket; nothing else.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self' ws: wss:; img-src 'self' blob: data:; media-src 'self' blob:; \
                 frame-ancestors 'none'",
            ),
        ],
        include_str!("../web/index.html"),
    )
        .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DevTokenRequest {
    user: String,
    /// Absent: the default device; `null` is refused like any non-string.
    #[serde(default, deserialize_with = "switchboard_protocol::fields::present")]
    device: Option<String>,
}

/// Dev mode only: a 24-hour token for the demo tenant.
async fn dev_token(
    State(gw): State<Shared>,
    JsonBody(body): JsonBody<DevTokenRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Some(dev) = &gw.config.dev_tokens else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such endpoint"));
    };
    let user = UserId::new(body.user).map_err(|e| ApiError::invalid(e.to_string()))?;
    let device = body
        .device
        .map(switchboard_protocol::DeviceId::new)
        .transpose()
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() + 86_400)
        .unwrap_or(0);
    let mut claims = serde_json::json!({ "tenant": dev.tenant, "sub": user, "exp": exp });
    if let Some(d) = device {
        claims["device"] = serde_json::Value::String(d.into_string());
    }
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(dev.hs256_secret.as_bytes()),
    )
    .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    Ok(Json(
        serde_json::json!({ "token": token, "tenant": dev.tenant }),
    ))
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint")
}

async fn method_not_allowed() -> Response {
    let mut r = ApiError::invalid("method not allowed on this endpoint").into_response();
    *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_openapi_document_lists_every_route() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../openapi.json")).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let rest = include_str!("rest.rs");
        let router_code = [
            rest.split("#[cfg(test)]").next().unwrap(),
            include_str!("plugin_api.rs"),
            include_str!("media.rs"),
            include_str!("keys.rs"),
            include_str!("operator.rs"),
            include_str!("push.rs"),
        ]
        .concat();
        let mut routes = 0;
        for piece in router_code.split(".route(").skip(1) {
            let Some(path) = piece
                .trim_start()
                .strip_prefix('"')
                .and_then(|p| p.split('"').next())
            else {
                continue;
            };
            if path == "/" {
                continue; // the browser client, not an API
            }
            routes += 1;
            assert!(
                doc["paths"].get(path).is_some(),
                "{path} is missing from openapi.json"
            );
        }
        // Every route file is read above: a new one goes into that list.
        assert!(routes >= 20, "found {routes} routes");
    }
}
