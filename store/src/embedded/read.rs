//! Reads, each against one read snapshot.

use std::collections::BTreeSet;

use redb::{Database, ReadTransaction, ReadableTable};
use switchboard_protocol::{ConversationId, DeviceId, Message, TenantId, UserId};

use super::codec::{decode, storage};
use super::tables::*;
use crate::{
    ConversationDetail, ConversationKey, ConversationRecord, ConversationSummary, HistoryQuery,
    MemberRecord, SentKey, SequencerState, StoreError, StoreResult,
};

/// Creates the tables on first open and checks the schema version after.
pub(super) fn init_schema(db: &Database) -> StoreResult<()> {
    let txn = db.begin_write().map_err(storage)?;
    {
        let mut meta = txn.open_table(META).map_err(storage)?;
        let version = meta
            .get("schema_version")
            .map_err(storage)?
            .map(|v| v.value().to_owned());
        match version.as_deref() {
            None => {
                meta.insert("schema_version", SCHEMA_VERSION)
                    .map_err(storage)?;
            }
            Some(SCHEMA_VERSION) => {}
            Some(other) => {
                return Err(StoreError::Corrupt(format!(
                    "store schema version {other} is not {SCHEMA_VERSION}"
                )));
            }
        }
        // Opening creates: after this every table exists for readers.
        txn.open_table(CONVERSATIONS).map_err(storage)?;
        txn.open_table(MEMBERS).map_err(storage)?;
        txn.open_table(USER_CONVERSATIONS).map_err(storage)?;
        txn.open_table(MESSAGES).map_err(storage)?;
        txn.open_table(SENT).map_err(storage)?;
        txn.open_table(INBOX).map_err(storage)?;
        txn.open_table(DEVICES).map_err(storage)?;
        txn.open_table(DEVICE_CURSORS).map_err(storage)?;
        txn.open_table(BUCKETS).map_err(storage)?;
    }
    txn.commit().map_err(storage)
}

pub(super) fn ping(txn: &ReadTransaction) -> StoreResult<()> {
    txn.open_table(META).map_err(storage)?;
    Ok(())
}

fn conversation_record(
    txn: &ReadTransaction,
    tenant: &str,
    conversation: &str,
) -> StoreResult<Option<ConversationRecord>> {
    let table = txn.open_table(CONVERSATIONS).map_err(storage)?;
    let row = table.get((tenant, conversation)).map_err(storage)?;
    row.map(|v| decode(v.value())).transpose()
}

fn member(
    txn: &ReadTransaction,
    tenant: &str,
    conversation: &str,
    user: &str,
) -> StoreResult<Option<MemberRecord>> {
    let table = txn.open_table(MEMBERS).map_err(storage)?;
    let row = table.get((tenant, conversation, user)).map_err(storage)?;
    row.map(|v| decode(v.value())).transpose()
}

fn members(
    txn: &ReadTransaction,
    tenant: &str,
    conversation: &str,
) -> StoreResult<Vec<MemberRecord>> {
    let table = txn.open_table(MEMBERS).map_err(storage)?;
    let mut out = Vec::new();
    for row in table
        .range((tenant, conversation, "")..(tenant, conversation, AFTER_ANY_ID))
        .map_err(storage)?
    {
        let (_, v) = row.map_err(storage)?;
        out.push(decode(v.value())?);
    }
    Ok(out)
}

/// The conversation must exist and `reader` must be a member. A missing
/// conversation and a foreign one look different (`NotFound` and
/// `NotAMember`); conversation ids are not secret within a tenant.
fn check_member(
    txn: &ReadTransaction,
    tenant: &str,
    conversation: &str,
    reader: &str,
) -> StoreResult<(ConversationRecord, MemberRecord)> {
    let record = conversation_record(txn, tenant, conversation)?.ok_or(StoreError::NotFound)?;
    let me = member(txn, tenant, conversation, reader)?.ok_or(StoreError::NotAMember)?;
    Ok((record, me))
}

pub(super) fn sequencer_states(
    txn: &ReadTransaction,
    keys: &[ConversationKey],
) -> StoreResult<Vec<Option<SequencerState>>> {
    keys.iter()
        .map(|k| {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            let Some(record) = conversation_record(txn, t, c)? else {
                return Ok(None);
            };
            let members: BTreeSet<UserId> =
                members(txn, t, c)?.into_iter().map(|m| m.user_id).collect();
            Ok(Some(SequencerState {
                kind: record.kind,
                created_by: record.created_by,
                last_seq: record.last_seq,
                members,
            }))
        })
        .collect()
}

fn message(
    txn: &ReadTransaction,
    tenant: &str,
    conversation: &str,
    seq: u64,
) -> StoreResult<Option<Message>> {
    let table = txn.open_table(MESSAGES).map_err(storage)?;
    let row = table.get((tenant, conversation, seq)).map_err(storage)?;
    row.map(|v| decode(v.value())).transpose()
}

pub(super) fn find_sent(
    txn: &ReadTransaction,
    keys: &[SentKey],
) -> StoreResult<Vec<Option<Message>>> {
    let sent = txn.open_table(SENT).map_err(storage)?;
    keys.iter()
        .map(|k| {
            let (t, c) = (k.tenant.as_str(), k.conversation_id.as_str());
            let seq = sent
                .get((t, c, k.sender.as_str(), k.client_msg_id.as_str()))
                .map_err(storage)?
                .map(|v| v.value());
            match seq {
                Some(seq) => message(txn, t, c, seq),
                None => Ok(None),
            }
        })
        .collect()
}

pub(super) fn conversation(
    txn: &ReadTransaction,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
) -> StoreResult<ConversationDetail> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let (record, _) = check_member(txn, t, c, reader.as_str())?;
    Ok(ConversationDetail {
        record,
        members: members(txn, t, c)?,
    })
}

pub(super) fn conversations_of(
    txn: &ReadTransaction,
    tenant: &TenantId,
    user: &UserId,
) -> StoreResult<Vec<ConversationSummary>> {
    let (t, u) = (tenant.as_str(), user.as_str());
    let index = txn.open_table(USER_CONVERSATIONS).map_err(storage)?;
    let mut out = Vec::new();
    for row in index
        .range((t, u, "")..(t, u, AFTER_ANY_ID))
        .map_err(storage)?
    {
        let (k, _) = row.map_err(storage)?;
        let c = k.value().2;
        let Ok((record, me)) = check_member(txn, t, c, u) else {
            continue;
        };
        let member_ids = members(txn, t, c)?.into_iter().map(|m| m.user_id).collect();
        out.push(ConversationSummary {
            record,
            member_ids,
            me,
        });
    }
    out.sort_by(|a, b| {
        b.record
            .last_activity
            .cmp(&a.record.last_activity)
            .then_with(|| a.record.conversation_id.cmp(&b.record.conversation_id))
    });
    Ok(out)
}

pub(super) fn history(
    txn: &ReadTransaction,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
    query: HistoryQuery,
) -> StoreResult<Vec<Message>> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    check_member(txn, t, c, reader.as_str())?;
    let low = query.after_seq.map_or(1, |a| a.saturating_add(1));
    let high = query.before_seq.unwrap_or(u64::MAX);
    if low >= high || query.limit == 0 {
        return Ok(Vec::new());
    }
    let table = txn.open_table(MESSAGES).map_err(storage)?;
    let mut out = Vec::with_capacity(query.limit.min(256));
    for row in table
        .range((t, c, low)..(t, c, high))
        .map_err(storage)?
        .rev()
    {
        let (_, v) = row.map_err(storage)?;
        out.push(decode(v.value())?);
        if out.len() == query.limit {
            break;
        }
    }
    Ok(out)
}

pub(super) fn replay(
    txn: &ReadTransaction,
    tenant: &TenantId,
    conversation: &ConversationId,
    reader: &UserId,
    after_seq: u64,
    limit: usize,
) -> StoreResult<Vec<Message>> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    check_member(txn, t, c, reader.as_str())?;
    let table = txn.open_table(MESSAGES).map_err(storage)?;
    let mut out = Vec::with_capacity(limit.min(256));
    let start = after_seq.saturating_add(1);
    for row in table
        .range((t, c, start)..=(t, c, u64::MAX))
        .map_err(storage)?
    {
        if out.len() == limit {
            break;
        }
        let (_, v) = row.map_err(storage)?;
        out.push(decode(v.value())?);
    }
    Ok(out)
}

pub(super) fn inbox(
    txn: &ReadTransaction,
    tenant: &TenantId,
    user: &UserId,
    device: &DeviceId,
    limit: usize,
) -> StoreResult<Vec<Message>> {
    let (t, u, d) = (tenant.as_str(), user.as_str(), device.as_str());
    let table = txn.open_table(INBOX).map_err(storage)?;
    let mut out = Vec::with_capacity(limit.min(256));
    for row in table
        .range((t, u, d, "", 0)..=(t, u, d, AFTER_ANY_ID, u64::MAX))
        .map_err(storage)?
    {
        if out.len() == limit {
            break;
        }
        let (k, _) = row.map_err(storage)?;
        let (_, _, _, c, seq) = k.value();
        if let Some(m) = message(txn, t, c, seq)? {
            out.push(m);
        }
    }
    Ok(out)
}

pub(super) fn device_known(
    txn: &ReadTransaction,
    tenant: &TenantId,
    user: &UserId,
    device: &DeviceId,
) -> StoreResult<bool> {
    let table = txn.open_table(DEVICES).map_err(storage)?;
    Ok(table
        .get((tenant.as_str(), user.as_str(), device.as_str()))
        .map_err(storage)?
        .is_some())
}
