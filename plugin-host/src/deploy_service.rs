//! Plugin deploys as a service of the workers, so that gateways need no
//! write access to `sb_plugins` or `sb_plugin_code`.
//!
//! A gateway's admin API checks the caller (an admin of the tenant),
//! then puts the uploaded component into `sb_plugin_uploads` (the only
//! plugin bucket gateways may write) and asks the NATS micro service
//! `switchboard-plugins` on `sb.plugins.deploy` to deploy it. A worker
//! takes the deploy (within `deploy_queue`) and carries it out in the
//! background: it reads the upload within `max_component_bytes` whatever
//! its description claims and deletes it, and runs the [`Deployer`]
//! (validate, store by digest and share the compiled code, activate,
//! caps, prune), reporting its progress (`deploy_jobs.rs`). It answers
//! once the deploy is over, or, unless the admin asked to wait, after
//! [`ANSWER_WITHIN`] at most: then the admin API answers `202 Accepted`
//! and the progress is read from every process's status answer.
//! Promotions, rollbacks and removals are answered when done.
//!
//! [`PluginAdmin`] is what a gateway holds: the [`Deployer`]'s reads run
//! where it is, its changes through this service.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, object_store};
use async_nats::service::ServiceExt;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use switchboard_nats::admission::{Admission, AdmissionLimits};
use switchboard_nats::definitions::PLUGIN_UPLOADS_STORE;
use switchboard_nats::kv_key;
use switchboard_protocol::{TenantId, UserId};

use crate::compiler::Wait;
use crate::deploy::{DeployError, Deployer, Refusal, RefusalKind, Upload, VersionEntry};
use crate::deploy_jobs::{DeployProgress, Start};
use crate::hook::Hook;
use crate::registry::{OnFailure, Slot};

/// The micro service's name, as `nats micro ls` lists it.
pub const SERVICE_NAME: &str = "switchboard-plugins";
/// Where deploy requests go.
pub const DEPLOY_SUBJECT: &str = "sb.plugins.deploy";
/// Its queue group: one worker answers each request.
const QUEUE_GROUP: &str = "plugins";
/// Longest a deploy that does not wait is answered after: one over by
/// then (its code compiled already, or a small component) is answered
/// with its version, a longer one goes on in the background.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// A change to a tenant's plugin for a hook.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Change {
    /// Deploys the component uploaded as `upload` in `sb_plugin_uploads`.
    Deploy {
        shadow: bool,
        upload: String,
        #[serde(default)]
        config: BTreeMap<String, String>,
        #[serde(default)]
        on_failure: OnFailure,
        /// Answer once the deploy is over (the admin waits); without it
        /// the answer comes after `ANSWER_WITHIN` at most. Gateways from
        /// before deploys in the background send none: they wait.
        #[serde(default = "waits")]
        wait: bool,
        /// The deploy's id: its upload's nonce when none is given.
        #[serde(default)]
        id: Option<String>,
    },
    Promote,
    RemoveShadow,
    Rollback,
    Remove,
}

/// A request on the wire: who asks, for which tenant and hook, what.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    tenant: TenantId,
    hook: Hook,
    by: UserId,
    #[serde(flatten)]
    change: Change,
}

/// The answer: the version the change made active (none for a removal),
/// or why not.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Ok(Option<VersionEntry>),
    Err(Refusal),
    /// The deploy goes on in the background.
    Accepted(Box<DeployProgress>),
}

fn waits() -> bool {
    true
}

/// How a deploy request was answered.
#[derive(Debug)]
pub enum Deployed {
    /// It is over: the version it made.
    Done(VersionEntry),
    /// It goes on in the background: where it is.
    UnderWay(Box<DeployProgress>),
}

/// The name of a new upload of `tenant`: its tenant first, so a deploy
/// for one tenant never takes another's upload.
fn upload_name(tenant: &TenantId) -> String {
    let nonce: u128 = rand::random();
    format!("{}.{nonce:032x}", kv_key::part(tenant.as_str()))
}

/// The nonce of `name` if it is an upload of `tenant`.
fn nonce_of<'a>(tenant: &TenantId, name: &'a str) -> Option<&'a str> {
    name.strip_prefix(&*kv_key::part(tenant.as_str()))
        .and_then(|rest| rest.strip_prefix('.'))
        .filter(|nonce| is_deploy_id(nonce))
}

/// Whether `id` may name a deploy: 32 hexadecimal digits.
pub fn is_deploy_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[error("starting the plugin deploy service {SERVICE_NAME}")]
pub struct ServeError {
    #[source]
    source: async_nats::Error,
}

/// Answers deploy requests with `deployer` until the connection ends. At
/// most `limits` requests are in flight; past that a request is answered
/// `Unavailable` at once (compiling is bounded on its own by the
/// [`Compiler`](crate::compiler::Compiler)).
pub async fn serve(
    js: jetstream::Context,
    deployer: Arc<Deployer>,
    limits: AdmissionLimits,
) -> Result<(), ServeError> {
    let client = js.client();
    let uploads = js
        .get_object_store(PLUGIN_UPLOADS_STORE)
        .await
        .map_err(|e| ServeError { source: e.into() })?;
    let service = client
        .service_builder()
        .description("Deploys, promotes, rolls back and removes tenants' plugins")
        .queue_group(QUEUE_GROUP)
        .start(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .map_err(|source| ServeError { source })?;
    let mut requests = service
        .endpoint_builder()
        .name("deploy")
        .add(DEPLOY_SUBJECT)
        .await
        .map_err(|source| ServeError { source })?;
    // A deploy service's process shares the code it compiles, from now on
    // and what its activations compiled before.
    deployer.artifacts.start_writing();
    let admission = Admission::new(limits);
    while let Some(request) = requests.next().await {
        let Some(reply) = request.message.reply.as_ref() else {
            continue;
        };
        let admitted = match admission.admit(reply.as_str()) {
            Ok(admitted) => admitted,
            Err(refused) => {
                let busy = Refusal::new(RefusalKind::Unavailable, refused.to_string());
                respond(&request, Answer::Err(busy)).await;
                continue;
            }
        };
        let (deployer, uploads) = (deployer.clone(), uploads.clone());
        tokio::spawn(async move {
            let _admitted = admitted;
            let answer = match serde_json::from_slice::<Request>(&request.message.payload) {
                Ok(change) => apply(&deployer, &uploads, change).await,
                Err(e) => Answer::Err(Refusal::new(
                    RefusalKind::Invalid,
                    format!("bad deploy request: {e}"),
                )),
            };
            respond(&request, answer).await;
        });
    }
    drop(service);
    Ok(())
}

async fn respond(request: &async_nats::service::Request, answer: Answer) {
    let body = serde_json::to_vec(&answer).unwrap_or_default();
    if let Err(e) = request.respond(Ok(body.into())).await {
        tracing::warn!(error = %e, "answering a plugin deploy request failed");
    }
}

/// Carries out one change, or starts it (a deploy).
async fn apply(
    deployer: &Arc<Deployer>,
    uploads: &object_store::ObjectStore,
    request: Request,
) -> Answer {
    let Request {
        tenant,
        hook,
        by,
        change,
    } = request;
    let done = |result: Result<Option<VersionEntry>, DeployError>| match result {
        Ok(entry) => Answer::Ok(entry),
        Err(e) => Answer::Err(e.refusal()),
    };
    match change {
        Change::Deploy {
            shadow,
            upload,
            config,
            on_failure,
            wait,
            id,
        } => {
            let deploy = Deploy {
                tenant,
                hook,
                by,
                slot: if shadow { Slot::Shadow } else { Slot::Active },
                upload,
                config,
                on_failure,
            };
            start_deploy(deployer, uploads, deploy, id, wait).await
        }
        Change::Promote => done(deployer.promote(&tenant, hook, &by).await.map(Some)),
        Change::Rollback => done(deployer.rollback(&tenant, hook, &by).await.map(Some)),
        Change::RemoveShadow => done(
            deployer
                .remove_shadow(&tenant, hook, &by)
                .await
                .map(|()| None),
        ),
        Change::Remove => done(deployer.remove(&tenant, hook, &by).await.map(|()| None)),
    }
}

/// A deploy as the service takes it.
struct Deploy {
    tenant: TenantId,
    hook: Hook,
    by: UserId,
    slot: Slot,
    upload: String,
    config: BTreeMap<String, String>,
    on_failure: OnFailure,
}

/// Takes a deploy and carries it out in the background; answers once it
/// is over, or (unless `wait`) after [`ANSWER_WITHIN`] at most.
async fn start_deploy(
    deployer: &Arc<Deployer>,
    uploads: &object_store::ObjectStore,
    deploy: Deploy,
    id: Option<String>,
    wait: bool,
) -> Answer {
    let refused = |e: DeployError| Answer::Err(e.refusal());
    let Some(nonce) = nonce_of(&deploy.tenant, &deploy.upload) else {
        return refused(DeployError::NoSuchUpload);
    };
    let id = id.unwrap_or_else(|| nonce.to_owned());
    if !is_deploy_id(&id) {
        return refused(DeployError::Refused(Refusal::new(
            RefusalKind::Invalid,
            "a deploy id is 32 hexadecimal digits",
        )));
    }
    let plugins = &deployer.plugins;
    let start = Start {
        id,
        tenant: deploy.tenant.clone(),
        hook: deploy.hook,
        shadow: deploy.slot == Slot::Shadow,
        by: deploy.by.as_str().to_owned(),
        process: plugins.process().to_owned(),
    };
    let job = match plugins.deploys.start(start, Instant::now()) {
        Ok(job) => job,
        Err(e) => {
            // Whatever came of it, the upload has served.
            let _ = uploads.delete(&deploy.upload).await;
            return refused(e);
        }
    };
    let mut task = {
        let (deployer, uploads, job) = (deployer.clone(), uploads.clone(), job.clone());
        tokio::spawn(async move {
            let Deploy {
                tenant,
                hook,
                by,
                slot,
                upload,
                config,
                on_failure,
            } = deploy;
            let component = read_upload(&deployer, &uploads, &upload).await;
            // Whatever came of it, the upload has served.
            if let Err(e) = uploads.delete(&upload).await {
                tracing::debug!(error = %e, upload, "an upload was not deleted; it expires");
            }
            let outcome = match component {
                Ok(component) => {
                    let upload = Upload {
                        component,
                        config,
                        on_failure,
                    };
                    // An admin who waits waits at most the compile timeout
                    // for a compiler; one who does not, as long as it
                    // takes.
                    let compiler_wait = if wait { Wait::Bounded } else { Wait::Patient };
                    deployer
                        .deploy_reporting(
                            &tenant,
                            hook,
                            slot,
                            upload,
                            &by,
                            Some(job.clone()),
                            compiler_wait,
                        )
                        .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = &outcome {
                tracing::info!(tenant = %tenant, %hook, error = %e, "plugin deploy refused");
            }
            deployer
                .plugins
                .deploys
                .finish(&job, &outcome, error_body, Instant::now());
            outcome
        })
    };
    let over =
        |joined: Result<Result<VersionEntry, DeployError>, tokio::task::JoinError>| match joined {
            Ok(Ok(entry)) => Answer::Ok(Some(entry)),
            Ok(Err(e)) => refused(e),
            Err(e) => Answer::Err(Refusal::new(
                RefusalKind::Internal,
                format!("the deploy failed: {e}"),
            )),
        };
    if wait {
        return over(task.await);
    }
    match tokio::time::timeout(ANSWER_WITHIN, &mut task).await {
        Ok(joined) => over(joined),
        Err(_) => Answer::Accepted(Box::new(job.progress())),
    }
}

/// How a failed deploy's report says why.
fn error_body(e: &DeployError) -> switchboard_protocol::error::ErrorBody {
    switchboard_protocol::error::ErrorBody {
        code: e.kind().code(),
        message: e.to_string(),
        retry_after_ms: None,
    }
}

/// The uploaded component, read within `max_component_bytes`.
async fn read_upload(
    deployer: &Deployer,
    uploads: &object_store::ObjectStore,
    name: &str,
) -> Result<Vec<u8>, DeployError> {
    let object = uploads.get(name).await.map_err(|e| match e.kind() {
        object_store::GetErrorKind::NotFound => DeployError::NoSuchUpload,
        _ => crate::deploy::backbone(e),
    })?;
    let claimed = object.info().size as u64;
    crate::objects::read_bounded(object, claimed, deployer.max_component_bytes())
        .await
        .map_err(DeployError::Upload)
}

/// What a gateway's admin API holds: reads of the [`Deployer`] here,
/// changes through the workers' deploy service.
pub struct PluginAdmin {
    deployer: Deployer,
    client: async_nats::Client,
    uploads: object_store::ObjectStore,
    /// How long a change may take before the answer is `Unavailable`:
    /// a compile's own bound, and room for storing and activating.
    timeout: Duration,
}

impl PluginAdmin {
    pub async fn open(js: &jetstream::Context, deployer: Deployer) -> Result<Self, DeployError> {
        let timeout = deployer.compile_timeout() + Duration::from_secs(10);
        Ok(Self {
            uploads: js
                .get_object_store(PLUGIN_UPLOADS_STORE)
                .await
                .map_err(crate::deploy::backbone)?,
            client: js.client(),
            deployer,
            timeout,
        })
    }

    /// The reads, which run here.
    pub fn reads(&self) -> &Deployer {
        &self.deployer
    }

    /// Stages the upload and has a worker deploy it: the answer comes
    /// once it is over when `wait`, else after [`ANSWER_WITHIN`] at most
    /// (then it goes on in the background).
    pub async fn deploy(
        &self,
        tenant: &TenantId,
        hook: Hook,
        slot: Slot,
        upload: Upload,
        by: &UserId,
        wait: bool,
    ) -> Result<Deployed, DeployError> {
        let Upload {
            component,
            config,
            on_failure,
        } = upload;
        // Refused here before it is stored anywhere; the worker checks again.
        let max = self.deployer.max_component_bytes();
        if component.len() > max {
            return Err(DeployError::Upload(crate::objects::ReadError::TooLarge {
                claimed: component.len() as u64,
                max,
            }));
        }
        let name = upload_name(tenant);
        self.uploads
            .put(name.as_str(), &mut component.as_slice())
            .await
            .map_err(crate::deploy::backbone)?;
        let change = Change::Deploy {
            shadow: slot == Slot::Shadow,
            id: nonce_of(tenant, &name).map(str::to_owned),
            upload: name,
            config,
            on_failure,
            wait,
        };
        match self.ask(tenant, hook, by, change).await? {
            Answer::Ok(Some(entry)) => Ok(Deployed::Done(entry)),
            Answer::Ok(None) => Err(DeployError::NotDeployed),
            Answer::Accepted(progress) => Ok(Deployed::UnderWay(progress)),
            Answer::Err(refusal) => Err(DeployError::Refused(refusal)),
        }
    }

    pub async fn promote(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<VersionEntry, DeployError> {
        self.change(tenant, hook, by, Change::Promote)
            .await?
            .ok_or(DeployError::NoShadow)
    }

    pub async fn rollback(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<VersionEntry, DeployError> {
        self.change(tenant, hook, by, Change::Rollback)
            .await?
            .ok_or(DeployError::NothingToRollBack)
    }

    pub async fn remove_shadow(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<(), DeployError> {
        self.change(tenant, hook, by, Change::RemoveShadow)
            .await
            .map(drop)
    }

    pub async fn remove(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
    ) -> Result<(), DeployError> {
        self.change(tenant, hook, by, Change::Remove)
            .await
            .map(drop)
    }

    /// A change's version (none for a removal), or why not.
    async fn change(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
        change: Change,
    ) -> Result<Option<VersionEntry>, DeployError> {
        match self.ask(tenant, hook, by, change).await? {
            Answer::Ok(entry) => Ok(entry),
            Answer::Err(refusal) => Err(DeployError::Refused(refusal)),
            Answer::Accepted(_) => Err(DeployError::Refused(Refusal::new(
                RefusalKind::Internal,
                "the deploy service answered a change as a deploy",
            ))),
        }
    }

    async fn ask(
        &self,
        tenant: &TenantId,
        hook: Hook,
        by: &UserId,
        change: Change,
    ) -> Result<Answer, DeployError> {
        let request = Request {
            tenant: tenant.clone(),
            hook,
            by: by.clone(),
            change,
        };
        let payload = serde_json::to_vec(&request).map_err(crate::deploy::backbone)?;
        let request = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(self.timeout));
        let answer = self
            .client
            .send_request(DEPLOY_SUBJECT, request)
            .await
            .map_err(|e| {
                DeployError::Refused(Refusal::new(
                    RefusalKind::Unavailable,
                    format!("the plugin deploy service did not answer ({e}); is a worker running?"),
                ))
            })?;
        serde_json::from_slice::<Answer>(&answer.payload).map_err(crate::deploy::backbone)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn is_upload_of(tenant: &TenantId, name: &str) -> bool {
        nonce_of(tenant, name).is_some()
    }

    #[test]
    fn an_upload_belongs_to_its_tenant() {
        let acme = TenantId::new("acme").unwrap();
        let dotted = TenantId::new("acme.x").unwrap();
        let name = upload_name(&acme);
        assert!(is_upload_of(&acme, &name));
        assert!(!is_upload_of(&dotted, &name));
        assert!(!is_upload_of(&acme, &upload_name(&dotted)));
        assert!(!is_upload_of(&acme, "acme.sha256:00"));
        assert!(!is_upload_of(&acme, "acme"));
    }

    #[test]
    fn requests_and_answers_cross_the_wire() {
        let request = Request {
            tenant: TenantId::new("acme").unwrap(),
            hook: Hook::Moderation,
            by: UserId::new("root").unwrap(),
            change: Change::Deploy {
                shadow: true,
                upload: "acme.00".into(),
                config: BTreeMap::from([("k".into(), "v".into())]),
                on_failure: OnFailure::Open,
                wait: false,
                id: None,
            },
        };
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(json["op"], "deploy");
        assert_eq!(json["tenant"], "acme");
        let back: Request = serde_json::from_value(json).unwrap();
        assert!(matches!(back.change, Change::Deploy { shadow: true, .. }));
        let removal: Request = serde_json::from_value(
            serde_json::json!({"tenant": "acme", "hook": "moderation", "by": "root", "op": "remove"}),
        )
        .unwrap();
        assert!(matches!(removal.change, Change::Remove));

        let refused = Answer::Err(Refusal::new(RefusalKind::OverQuota, "too much"));
        let back: Answer = serde_json::from_slice(&serde_json::to_vec(&refused).unwrap()).unwrap();
        assert!(matches!(
            back,
            Answer::Err(Refusal {
                kind: RefusalKind::OverQuota,
                ..
            })
        ));
        let none: Answer = serde_json::from_str(r#"{"ok": null}"#).unwrap();
        assert!(matches!(none, Answer::Ok(None)));
    }
}
