//! Deploys of a tenant's plugin versions through the admin API: the
//! upload in either form (the raw component, `Content-Type:
//! application/wasm`, configuration as `config.<key>=<value>` query
//! parameters and `on_failure=open|closed`; or JSON `{ "component":
//! base64, "config": {..}, "on_failure": .. }`), and how far each deploy
//! has got.
//!
//! A worker compiles the component outside the request (a JavaScript
//! engine takes tens of seconds). By default the request waits for it and
//! is answered `201` with the version, as deploys always were; with
//! `wait=false` it is answered `202 Accepted` with the deploy's progress
//! and a `Location` to poll (or `201` when it was over within a moment).

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Deserialize;
use switchboard_plugin_host::Hook;
use switchboard_plugin_host::deploy::{Upload, VersionEntry};
use switchboard_plugin_host::deploy_jobs::DeployProgress;
use switchboard_plugin_host::deploy_service::{Deployed, is_deploy_id};
use switchboard_plugin_host::registry::{OnFailure, Slot};
use switchboard_protocol::ErrorCode;

use super::extract::Shared;
use super::extract::{Admin, PathParam, PathParams};
use super::openapi::Operation;
use super::plugins::converge;
use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;

/// A deploy as JSON, the component in base64.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct JsonUpload {
    /// The component, base64 (standard alphabet, padded).
    #[schemars(extend("contentEncoding" = "base64"))]
    component: String,
    /// Values the plugin reads through its `config` import.
    #[serde(default)]
    #[schemars(extend(
        "maxProperties" = MAX_CONFIG_ENTRIES,
        "propertyNames" = { "minLength": 1, "maxLength": MAX_CONFIG_KEY },
        "additionalProperties" = { "type": "string", "maxLength": MAX_CONFIG_VALUE }
    ))]
    config: BTreeMap<String, String>,
    #[serde(default)]
    on_failure: OnFailure,
}

/// Longest configuration key and value, and most entries.
const MAX_CONFIG_KEY: usize = 128;
const MAX_CONFIG_VALUE: usize = 16 * 1024;
const MAX_CONFIG_ENTRIES: usize = 64;

fn check_config(config: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if config.len() > MAX_CONFIG_ENTRIES {
        return Err(ApiError::invalid(format!(
            "more than {MAX_CONFIG_ENTRIES} configuration values"
        )));
    }
    // Characters, as the OpenAPI document's maxLength counts them.
    for (k, v) in config {
        let (key, value) = (k.chars().count(), v.chars().count());
        if key == 0 || key > MAX_CONFIG_KEY || value > MAX_CONFIG_VALUE {
            return Err(ApiError::invalid(format!(
                "configuration keys are 1 to {MAX_CONFIG_KEY} characters and values at most {MAX_CONFIG_VALUE}"
            )));
        }
    }
    Ok(())
}

/// An upload, whichever form it came in: the component's bytes with the
/// configuration in the query string, or JSON.
fn parse_upload(
    headers: &HeaderMap,
    query: BTreeMap<String, String>,
    body: Bytes,
) -> Result<Upload, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("application/json") {
        let upload: JsonUpload =
            serde_json::from_slice(&body).map_err(|e| ApiError::invalid(e.to_string()))?;
        let component = base64::engine::general_purpose::STANDARD
            .decode(upload.component.as_bytes())
            .map_err(|e| ApiError::invalid(format!("component is not base64: {e}")))?;
        return Ok(Upload {
            component,
            config: upload.config,
            on_failure: upload.on_failure,
        });
    }
    if !content_type.starts_with("application/wasm") {
        return Err(ApiError::invalid(
            "send the component as application/wasm, or JSON with a base64 `component`",
        ));
    }
    let mut config = BTreeMap::new();
    let mut on_failure = OnFailure::default();
    for (k, v) in query {
        if let Some(key) = k.strip_prefix("config.") {
            config.insert(key.to_owned(), v);
        } else if k == "on_failure" {
            on_failure = match v.as_str() {
                "closed" => OnFailure::Closed,
                "open" => OnFailure::Open,
                _ => return Err(ApiError::invalid("on_failure is `closed` or `open`")),
            };
        } else {
            return Err(ApiError::invalid(format!(
                "unknown parameter {k:?}: use config.<key>=<value> and on_failure"
            )));
        }
    }
    Ok(Upload {
        component: body.to_vec(),
        config,
        on_failure,
    })
}

impl Operation {
    /// A version's upload, in either form `parse_upload` takes.
    fn upload(self) -> Self {
        self.query::<String>(
            "config.<key>",
            "With a raw upload: a configuration value (any number of them).",
        )
        .query::<OnFailure>(
            "on_failure",
            "With a raw upload: moderation's failure policy (default closed).",
        )
        .query::<bool>(
            "wait",
            "true (the default): answer once the deploy is over, 201 with the version or its error. false: answer within 2 s, 202 with the deploy's progress and a Location to poll while it goes on (201 when it was over by then).",
        )
        .bytes_body("application/wasm")
        .json_body::<JsonUpload>()
    }
}

/// `PUT /v1/admin/plugins/{hook}`
pub(super) fn deploy_op() -> Operation {
    Operation::put("Deploy a plugin version")
        .describe("Admin role. Validates the component (a WebAssembly component of the hook's world in wit/0.1.0 that passes a trial call), stores it and makes it active on every gateway and worker. A worker compiles it outside the request (or loads its code precompiled from sb_plugin_compiled). By default the answer waits: 201 with the version once this gateway runs it (waiting at most compile_timeout_ms for a compiler). With wait=false the answer comes within 2 s: 202 with the deploy's progress (Location: .../deploys/{id}, which GET follows through queued, compiling, stored, active or failed), or 201 when it was over by then. The body is the component itself (application/wasm, with configuration in the query string) or JSON. See plugins/README.md.")
        .path::<Hook>("hook", "The hook.")
        .upload()
        .reply::<VersionEntry>(201, "Deployed.")
        .reply::<DeployProgress>(202, "Under way: Location names its progress.")
        .errors(&[404, 429])
}

pub(super) async fn deploy(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    deploy_to(&gw, &id, path, Slot::Active, query, &headers, body).await
}

/// A deploy to `slot`, in either upload form.
async fn deploy_to(
    gw: &Gateway,
    id: &Identity,
    path: PathParams<Hook>,
    slot: Slot,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let hook = path.get()?;
    let Query(mut query) = query?;
    // Waiting is the default: clients from before deploys ran in the
    // background expect the version in the answer.
    let wait = match query.remove("wait").as_deref() {
        None | Some("true") => true,
        Some("false") => false,
        Some(_) => return Err(ApiError::invalid("wait is `true` or `false`")),
    };
    let upload = parse_upload(headers, query, body?)?;
    check_config(&upload.config)?;
    let deployed = gw
        .deployer
        .deploy(&id.tenant, hook, slot, upload, &id.user, wait)
        .await?;
    Ok(match deployed {
        Deployed::Done(entry) => {
            converge(gw, id, hook, slot, Some(entry.revision)).await;
            (StatusCode::CREATED, Json(entry)).into_response()
        }
        Deployed::UnderWay(progress) => {
            let location = format!("/v1/admin/plugins/{hook}/deploys/{}", progress.id);
            (
                StatusCode::ACCEPTED,
                [(header::LOCATION, location)],
                Json(*progress),
            )
                .into_response()
        }
    })
}

/// `PUT /v1/admin/plugins/{hook}/shadow`
pub(super) fn deploy_shadow_op() -> Operation {
    Operation::put("Deploy a shadow version")
        .describe("Admin role. Checked, stored and counted against the storage caps like a deploy (same body forms and answers: 201 once over, or with wait=false 202 with its progress), then run on every gateway and worker beside the active version, on the same live input under the same limits, without effect: it replaces the hook's shadow before. GET .../shadow reports how often it agrees. See plugins/README.md.")
        .path::<Hook>("hook", "The hook.")
        .upload()
        .reply::<VersionEntry>(201, "Deployed as the shadow.")
        .reply::<DeployProgress>(202, "Under way: Location names its progress.")
        .errors(&[404, 429])
}

pub(super) async fn deploy_shadow(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    deploy_to(&gw, &id, path, Slot::Shadow, query, &headers, body).await
}

/// A deploy's id in a path: 32 hexadecimal digits.
#[derive(schemars::JsonSchema)]
#[schemars(extend("pattern" = "^[0-9a-f]{32}$"))]
pub(super) struct DeployId(String);

impl PathParam for DeployId {
    type Raw = String;

    fn from_path(raw: String) -> Result<Self, ApiError> {
        match is_deploy_id(&raw) {
            true => Ok(Self(raw)),
            false => Err(ApiError::new(
                ErrorCode::NotFound,
                "no such deploy: a deploy id is 32 hexadecimal digits",
            )),
        }
    }
}

/// `GET /v1/admin/plugins/{hook}/deploys`
pub(super) fn deploys_op() -> Operation {
    Operation::get("The hook's deploys and how far each has got")
        .describe("Admin role. The deploys of the hook that the workers carry out, or finished within deploy_report_ms (15 minutes, at most deploy_reports per worker), newest first; each as GET .../deploys/{id} shows it. Asks every gateway and worker, as GET .../shadow does (300 ms).")
        .path::<Hook>("hook", "The hook.")
        .reply::<Vec<DeployProgress>>(200, "The deploys.")
        .errors(&[404])
}

pub(super) async fn deploys(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<Hook>,
) -> Result<Json<Vec<DeployProgress>>, ApiError> {
    let hook = path.get()?;
    Ok(Json(gw.deployer.reads().deploys(&id.tenant, hook).await?))
}

/// `GET /v1/admin/plugins/{hook}/deploys/{id}`
pub(super) fn deploy_progress_op() -> Operation {
    Operation::get("How far a deploy has got")
        .describe("Admin role. `state` is queued (waiting for a compiler), compiling (compiling, or loading its precompiled code, and the trial call), stored (the version is made the hook's: every process is activating it), active (every gateway and worker that answered within 300 ms runs it; `processes` lists them) or failed (`error` says why, as the deploy would have answered it; nothing was activated). 404 once the deploy is older than deploy_report_ms, or when the worker that carried it out stopped: the version listing shows what was deployed.")
        .path::<Hook>("hook", "The hook.")
        .path::<DeployId>("id", "The deploy, as its 202 answer named it.")
        .reply::<DeployProgress>(200, "The deploy.")
        .errors(&[404])
}

pub(super) async fn deploy_progress(
    State(gw): State<Shared>,
    Admin(id): Admin,
    path: PathParams<(Hook, DeployId)>,
) -> Result<Json<DeployProgress>, ApiError> {
    let (hook, DeployId(deploy)) = path.get()?;
    gw.deployer
        .reads()
        .deploys(&id.tenant, hook)
        .await?
        .into_iter()
        .find(|d| d.id == deploy)
        .map(Json)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("no deploy {deploy} of this hook is known: it finished more than deploy_report_ms ago, or the worker carrying it out stopped; the version listing shows what was deployed"),
            )
        })
}
