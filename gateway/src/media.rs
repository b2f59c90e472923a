//! Media (F13), the gateway's part beyond its endpoints (`http/media.rs`,
//! `http/blobs.rs`): where blobs are kept (`MediaStore`), who may read one
//! (its uploader, and members of a conversation with a message that
//! references it), what a message may say of one it carries, and the
//! collector of uploads no message references (any more), whose walk
//! also counts what each user and tenant stores (`media/usage.rs`).
//!
//! The flow: `POST /v1/media` grants an upload and answers with a signed
//! URL; the client PUTs the bytes there (for the local blob store,
//! `PUT /v1/blobs/{token}` on a gateway; for S3, S3 itself); a message
//! carries the `blob_ref`; `GET /v1/media/{blob_ref}` redirects whoever may
//! read it to a short-lived signed download URL.

mod store;
mod usage;

use std::sync::Arc;
use std::time::Duration;

use switchboard_blob::{BlobInfo, BlobRef};
use switchboard_protocol::content::Media;
use switchboard_protocol::{ErrorCode, Timestamp};

use crate::Gateway;
use crate::auth::Identity;
use crate::error::ApiError;

pub use store::MediaStore;
pub(crate) use usage::{OverQuota, StorageLimits};

/// Blobs looked at per step of the collector.
const GC_STEP: usize = 500;

/// The blob collector: every `gc_every_secs` (and once at start), walks
/// every stored blob, deletes uploads older than `gc_grace_secs` that no
/// stored message references (an upload whose message never came, a
/// blob whose messages were all deleted, an abuser filling the disk), and
/// counts what the others take per user and tenant. Every gateway runs it
/// over the blob store it serves: with local blobs each machine's own
/// directory, with S3 the shared bucket (several gateways then repeat the
/// walk; deleting twice is harmless). A step looks at `GC_STEP` blobs,
/// from where the last one stopped (an open directory, a listing's
/// continuation): a walk costs one look per blob and a store lookup per
/// blob past its grace.
/// Starts the collector of unreferenced uploads, which also counts what
/// each user and tenant stores (every `gc_every_secs`).
pub fn start_collector(gw: &Arc<Gateway>) {
    let every = gw.config.media.gc_every_secs;
    if every == 0 {
        return;
    }
    let gw = Arc::downgrade(gw);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(every));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(gw) = gw.upgrade() else { return };
            match gw.collect_unreferenced_media().await {
                Ok((0, _)) => {}
                Ok((removed, kept)) => {
                    tracing::info!(removed, kept, "unreferenced uploads removed")
                }
                Err(e) => {
                    tracing::warn!(error = %e.message, "the blob collector stopped; it tries again later")
                }
            }
        }
    });
}

impl Gateway {
    /// One walk of the collector: how many uploads it removed, and how
    /// many it looked at and kept (and counted).
    pub(crate) async fn collect_unreferenced_media(&self) -> Result<(usize, usize), ApiError> {
        let usage = &self.media.usage;
        let walk = usage.begin_walk();
        let walked = self.walk_blobs(walk).await;
        match walked {
            Ok((removed, kept, tally)) => {
                usage.finish_walk(walk, tally);
                crate::metrics::blobs_collected(removed);
                Ok((removed, kept))
            }
            Err(e) => {
                usage.abandon_walk(walk);
                Err(e)
            }
        }
    }

    async fn walk_blobs(&self, walk: u64) -> Result<(usize, usize, usage::Tally), ApiError> {
        let grace_ms =
            i64::try_from(self.config.media.gc_grace_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        let cutoff = Timestamp::now().unix_ms().saturating_sub(grace_ms);
        let (mut removed, mut kept) = (0, 0);
        let mut tally = usage::Tally::default();
        let mut erased = ErasedUploaders::open(&self.js).await;
        let mut blobs = self.media.blobs.walk_media();
        while let Some(page) = blobs.next_page(GC_STEP).await? {
            for m in page {
                self.media.usage.seen(walk, &m.blob_ref);
                let old = m.uploaded_at.unix_ms() < cutoff;
                if erased.uploaded_before_erasure(&m).await
                    || old
                        && !self
                            .store
                            .media_referenced(&m.tenant, m.blob_ref.as_str())
                            .await?
                        && !self
                            .is_avatar(&m.tenant, m.uploaded_by.as_ref(), &m.blob_ref)
                            .await?
                {
                    self.media
                        .blobs
                        .delete_media(&m.tenant, &m.blob_ref)
                        .await?;
                    removed += 1;
                } else {
                    tally.add(&m);
                    kept += 1;
                }
            }
        }
        Ok((removed, kept, tally))
    }

    /// The storage limits of a user's grants: the tenant's quotas, or
    /// the deployment's `[media]` defaults.
    pub(crate) fn storage_limits(&self, tenant: &switchboard_protocol::TenantId) -> StorageLimits {
        let quotas = self.quotas.book.quotas(tenant);
        let media = &self.config.media;
        StorageLimits {
            per_user: quotas
                .max_media_bytes_per_user
                .unwrap_or(media.max_stored_bytes_per_user),
            per_tenant: quotas
                .max_media_bytes
                .unwrap_or(media.max_stored_bytes_per_tenant),
        }
    }

    /// Whether the blob is its uploader's avatar (v1.3): kept, and
    /// readable by every user of the tenant.
    async fn is_avatar(
        &self,
        tenant: &switchboard_protocol::TenantId,
        uploader: Option<&switchboard_protocol::UserId>,
        blob_ref: &BlobRef,
    ) -> Result<bool, ApiError> {
        let Some(uploader) = uploader else {
            return Ok(false);
        };
        let profiles = self.store.profiles(tenant, vec![uploader.clone()]).await?;
        Ok(profiles
            .into_iter()
            .flatten()
            .any(|p| p.avatar.as_deref() == Some(blob_ref.as_str())))
    }

    /// The blob, if the caller uploaded it, is a member of a conversation
    /// with a message that references it, or it is its uploader's avatar.
    pub(crate) async fn readable(
        &self,
        id: &Identity,
        blob_ref: &BlobRef,
    ) -> Result<Option<BlobInfo>, ApiError> {
        let Some(info) = self.media.blobs.info(&id.tenant, blob_ref).await? else {
            return Ok(None);
        };
        let readable = info.uploaded_by == id.user
            || self
                .store
                .media_readable(&id.tenant, blob_ref.as_str(), &id.user)
                .await?
            || self
                .is_avatar(&id.tenant, Some(&info.uploaded_by), blob_ref)
                .await?;
        Ok(readable.then_some(info))
    }

    /// Checks media content a client sends: the blob was uploaded, by the
    /// sender or into a conversation the sender can read (forwarding), and
    /// the message describes it as it is.
    pub(crate) async fn check_media(&self, id: &Identity, media: &Media) -> Result<(), ApiError> {
        let missing = || {
            ApiError::new(
                ErrorCode::NotFound,
                format!("no upload {} to refer to", media.blob_ref),
            )
        };
        let blob_ref = BlobRef::parse(&media.blob_ref).map_err(|_| missing())?;
        let info = match self.media.blobs.info(&id.tenant, &blob_ref).await {
            Ok(Some(info)) => info,
            Ok(None) => return Err(missing()),
            // Any failure of the lookup refuses a send as `unavailable`:
            // the mapping `?` would apply is the media endpoints'.
            Err(e) => return Err(ApiError::new(ErrorCode::Unavailable, e.to_string())),
        };
        let readable = info.uploaded_by == id.user
            || self
                .store
                .media_readable(&id.tenant, blob_ref.as_str(), &id.user)
                .await?;
        if !readable {
            return Err(missing());
        }
        if info.mime != media.mime || info.size != media.size {
            return Err(ApiError::new(
                ErrorCode::InvalidFrame,
                format!(
                    "the upload is {} of {} bytes, not {} of {}",
                    info.mime, info.size, media.mime, media.size
                ),
            ));
        }
        Ok(())
    }
}

/// Uploaders erased (v1.2), as one walk of the collector finds them: an
/// upload made before its uploader's erasure began goes, referenced or
/// not (it is part of what they sent, archived messages included). One
/// look at `sb_erasures` per uploader per walk; without the bucket
/// nothing is taken for erased.
struct ErasedUploaders {
    erasures: Option<switchboard_nats::records::erasures::Erasures>,
    seen: std::collections::HashMap<
        (switchboard_protocol::TenantId, switchboard_protocol::UserId),
        Option<Timestamp>,
    >,
}

impl ErasedUploaders {
    async fn open(js: &async_nats::jetstream::Context) -> Self {
        let erasures = switchboard_nats::records::erasures::Erasures::open(js)
            .await
            .map_err(|e| tracing::warn!(error = %e, "the collector cannot read the erasure jobs"))
            .ok();
        Self {
            erasures,
            seen: Default::default(),
        }
    }

    async fn uploaded_before_erasure(&mut self, m: &switchboard_blob::StoredMedia) -> bool {
        let (Some(erasures), Some(user)) = (&self.erasures, &m.uploaded_by) else {
            return false;
        };
        let who = (m.tenant.clone(), user.clone());
        let since = match self.seen.get(&who) {
            Some(since) => *since,
            None => {
                let id = switchboard_nats::records::erasures::job_id(&m.tenant, user);
                let since = match erasures.get(&id).await {
                    // A failed job erased nothing for sure: its
                    // uploads wait for the job run again.
                    Ok(job) => job
                        .filter(|(r, _)| {
                            r.job.state != switchboard_protocol::jobs::JobState::Failed
                        })
                        .map(|(r, _)| r.job.created_at),
                    Err(e) => {
                        tracing::warn!(error = %e, "the collector cannot read an erasure job");
                        None
                    }
                };
                self.seen.insert(who, since);
                since
            }
        };
        since.is_some_and(|since| m.uploaded_at <= since)
    }
}
