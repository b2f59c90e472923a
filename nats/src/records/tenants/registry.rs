//! Reading and changing tenants in `sb_tenants` ([`TenantRegistry`]):
//! compare-and-set updates, each record validated before it is written.

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use switchboard_protocol::{TenantId, Timestamp};

use crate::definitions::TENANTS_BUCKET;
use crate::kv_key;

use super::error::{TenantError, nats};
use super::record::validate;
use super::record::{TenantRecord, tenant_of_key};

/// Reads and changes tenants.
#[derive(Clone)]
pub struct TenantRegistry {
    kv: kv::Store,
}

impl TenantRegistry {
    pub async fn open(js: &jetstream::Context) -> Result<Self, TenantError> {
        Ok(Self {
            kv: js.get_key_value(TENANTS_BUCKET).await.map_err(nats)?,
        })
    }

    async fn read(&self, id: &TenantId) -> Result<Option<(TenantRecord, u64)>, TenantError> {
        let Some(entry) = self
            .kv
            .entry(kv_key::part(id.as_str()))
            .await
            .map_err(nats)?
        else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let record =
            serde_json::from_slice(&entry.value).map_err(|source| TenantError::Undecodable {
                id: id.to_string(),
                source,
            })?;
        Ok(Some((record, entry.revision)))
    }

    pub async fn get(&self, id: &TenantId) -> Result<TenantRecord, TenantError> {
        self.read(id)
            .await?
            .map(|(r, _)| r)
            .ok_or_else(|| TenantError::NotFound(id.to_string()))
    }

    pub async fn list(&self) -> Result<Vec<TenantRecord>, TenantError> {
        let mut keys = self.kv.keys().await.map_err(nats)?;
        let mut out = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.map_err(nats)?;
            let Some(id) = tenant_of_key(&key) else {
                continue;
            };
            if let Some((record, _)) = self.read(&id).await? {
                out.push(record);
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Creates a tenant; `Exists` if it does.
    pub async fn create(&self, record: TenantRecord) -> Result<TenantRecord, TenantError> {
        validate(&record)?;
        let bytes = serde_json::to_vec(&record).map_err(nats)?;
        match self
            .kv
            .create(kv_key::part(record.id.as_str()), bytes.into())
            .await
        {
            Ok(_) => Ok(record),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                Err(TenantError::Exists(record.id.to_string()))
            }
            Err(e) => Err(nats(e)),
        }
    }

    /// Changes a tenant with `change`, refused (`Conflict`) if someone else
    /// changed it between the read and the write.
    pub async fn update(
        &self,
        id: &TenantId,
        change: impl FnOnce(&mut TenantRecord) -> Result<(), TenantError>,
    ) -> Result<TenantRecord, TenantError> {
        let (mut record, revision) = self
            .read(id)
            .await?
            .ok_or_else(|| TenantError::NotFound(id.to_string()))?;
        change(&mut record)?;
        record.updated_at = Timestamp::now();
        validate(&record)?;
        let bytes = serde_json::to_vec(&record).map_err(nats)?;
        match self
            .kv
            .update(kv_key::part(id.as_str()), bytes.into(), revision)
            .await
        {
            Ok(_) => Ok(record),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(TenantError::Conflict(id.to_string()))
            }
            Err(e) => Err(nats(e)),
        }
    }

    pub async fn delete(&self, id: &TenantId) -> Result<(), TenantError> {
        if self.read(id).await?.is_none() {
            return Err(TenantError::NotFound(id.to_string()));
        }
        self.kv
            .delete(kv_key::part(id.as_str()))
            .await
            .map_err(nats)
    }
}
