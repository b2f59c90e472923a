//! Write operations, applied inside one redb write transaction by the
//! writer thread.

use redb::{ReadableTable, WriteTransaction};
use switchboard_protocol::{ConversationId, DeviceId, TenantId, Timestamp, UserId};

use super::codec::{decode, encode, storage};
use super::tables::*;
use crate::{ConversationKey, ConversationRecord, MemberRecord, Mutation, StoreError, day_bucket};

/// One job for the writer thread.
#[derive(Debug)]
pub(super) enum WriteOp {
    Commit(Vec<Mutation>),
    AckDelivered {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        conversation: ConversationId,
        seq: u64,
    },
    RegisterDevice {
        tenant: TenantId,
        user: UserId,
        device: DeviceId,
        at: Timestamp,
    },
}

/// Why an operation did not apply.
pub(super) enum ApplyError {
    /// Refused before anything was written: the transaction can go on.
    Clean(StoreError),
    /// Refused after some writes: the transaction must be thrown away.
    Dirty(StoreError),
}

impl From<redb::Error> for ApplyError {
    fn from(e: redb::Error) -> Self {
        ApplyError::Dirty(storage(e))
    }
}

macro_rules! redb_into_apply {
    ($($t:ty),*) => {$(
        impl From<$t> for ApplyError {
            fn from(e: $t) -> Self {
                ApplyError::Dirty(storage(e))
            }
        }
    )*};
}
redb_into_apply!(redb::StorageError, redb::TableError);

impl From<StoreError> for ApplyError {
    fn from(e: StoreError) -> Self {
        ApplyError::Dirty(e)
    }
}

pub(super) fn apply(txn: &WriteTransaction, op: &WriteOp) -> Result<(), ApplyError> {
    match op {
        WriteOp::Commit(mutations) => {
            for (i, m) in mutations.iter().enumerate() {
                apply_mutation(txn, m).map_err(|e| match e {
                    // A later mutation's refusal leaves the earlier ones
                    // written: the whole commit must be undone.
                    ApplyError::Clean(e) if i > 0 => ApplyError::Dirty(e),
                    other => other,
                })?;
            }
            Ok(())
        }
        WriteOp::AckDelivered {
            tenant,
            user,
            device,
            conversation,
            seq,
        } => ack_delivered(txn, tenant, user, device, conversation, *seq),
        WriteOp::RegisterDevice {
            tenant,
            user,
            device,
            at,
        } => {
            let mut devices = txn.open_table(DEVICES)?;
            let key = (tenant.as_str(), user.as_str(), device.as_str());
            if devices.get(key)?.is_none() {
                devices.insert(key, at.unix_ms())?;
            }
            Ok(())
        }
    }
}

fn load_conversation(
    txn: &WriteTransaction,
    key: &ConversationKey,
) -> Result<Option<ConversationRecord>, ApplyError> {
    let table = txn.open_table(CONVERSATIONS)?;
    let row = table.get((key.tenant.as_str(), key.conversation_id.as_str()))?;
    match row {
        Some(v) => Ok(Some(decode(v.value())?)),
        None => Ok(None),
    }
}

fn save_conversation(
    txn: &WriteTransaction,
    record: &ConversationRecord,
) -> Result<(), ApplyError> {
    let mut table = txn.open_table(CONVERSATIONS)?;
    let bytes = encode(record)?;
    table.insert(
        (record.tenant.as_str(), record.conversation_id.as_str()),
        bytes.as_slice(),
    )?;
    Ok(())
}

fn add_member(
    txn: &WriteTransaction,
    tenant: &TenantId,
    conversation: &ConversationId,
    user: &UserId,
    at: Timestamp,
) -> Result<(), ApplyError> {
    let mut members = txn.open_table(MEMBERS)?;
    let key = (tenant.as_str(), conversation.as_str(), user.as_str());
    if members.get(key)?.is_some() {
        return Ok(());
    }
    let row = MemberRecord {
        user_id: user.clone(),
        joined_at: at,
        delivered_seq: 0,
        read_seq: 0,
    };
    members.insert(key, encode(&row)?.as_slice())?;
    let mut index = txn.open_table(USER_CONVERSATIONS)?;
    index.insert((tenant.as_str(), user.as_str(), conversation.as_str()), ())?;
    Ok(())
}

fn apply_mutation(txn: &WriteTransaction, m: &Mutation) -> Result<(), ApplyError> {
    match m {
        Mutation::CreateConversation { record, members } => {
            let key = ConversationKey {
                tenant: record.tenant.clone(),
                conversation_id: record.conversation_id.clone(),
            };
            if load_conversation(txn, &key)?.is_some() {
                return Err(ApplyError::Clean(StoreError::Conflict(
                    "conversation exists".into(),
                )));
            }
            save_conversation(txn, record)?;
            for user in members {
                add_member(
                    txn,
                    &record.tenant,
                    &record.conversation_id,
                    user,
                    record.created_at,
                )?;
            }
            Ok(())
        }
        Mutation::AddMembers { key, users, at } => {
            if load_conversation(txn, key)?.is_none() {
                return Err(ApplyError::Clean(StoreError::NotFound));
            }
            for user in users {
                add_member(txn, &key.tenant, &key.conversation_id, user, *at)?;
            }
            Ok(())
        }
        Mutation::RemoveMembers { key, users } => {
            if load_conversation(txn, key)?.is_none() {
                return Err(ApplyError::Clean(StoreError::NotFound));
            }
            let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
            let mut members = txn.open_table(MEMBERS)?;
            let mut index = txn.open_table(USER_CONVERSATIONS)?;
            let mut inbox = txn.open_table(INBOX)?;
            let devices = txn.open_table(DEVICES)?;
            for user in users {
                let u = user.as_str();
                members.remove((t, c, u))?;
                index.remove((t, u, c))?;
                for d in devices.range((t, u, "")..(t, u, AFTER_ANY_ID))? {
                    let (dk, _) = d?;
                    let device = dk.value().2;
                    inbox.retain_in(
                        (t, u, device, c, 0)..=(t, u, device, c, u64::MAX),
                        |_, _| false,
                    )?;
                }
            }
            Ok(())
        }
        Mutation::Append {
            key,
            expected_last_seq,
            messages,
        } => append(txn, key, *expected_last_seq, messages),
    }
}

fn append(
    txn: &WriteTransaction,
    key: &ConversationKey,
    expected_last_seq: u64,
    messages: &[switchboard_protocol::Message],
) -> Result<(), ApplyError> {
    let Some(mut record) = load_conversation(txn, key)? else {
        return Err(ApplyError::Clean(StoreError::NotFound));
    };
    if record.last_seq != expected_last_seq {
        return Err(ApplyError::Clean(StoreError::Conflict(format!(
            "append expected last_seq {expected_last_seq}, store has {}",
            record.last_seq
        ))));
    }
    let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
    let mut sent = txn.open_table(SENT)?;
    for (i, m) in messages.iter().enumerate() {
        if m.seq != expected_last_seq + 1 + i as u64 || m.conversation_id != key.conversation_id {
            return Err(ApplyError::Clean(StoreError::Conflict(format!(
                "message seq {} does not continue {expected_last_seq}",
                m.seq
            ))));
        }
        let sent_key = (t, c, m.sender_id.as_str(), m.client_msg_id.as_str());
        if sent.get(sent_key)?.is_some() {
            return Err(ApplyError::Clean(StoreError::Conflict(format!(
                "client_msg_id {} already stored",
                m.client_msg_id
            ))));
        }
    }
    let Some(last) = messages.last() else {
        return Ok(());
    };

    // Every device of every member gets an inbox entry, except the device
    // that sent the message (it has it already).
    let mut members = txn.open_table(MEMBERS)?;
    let devices = txn.open_table(DEVICES)?;
    let mut recipients: Vec<(String, Vec<String>)> = Vec::new();
    for row in members.range((t, c, "")..(t, c, AFTER_ANY_ID))? {
        let (k, _) = row?;
        let user = k.value().2.to_owned();
        let mut user_devices = Vec::new();
        for d in devices.range((t, user.as_str(), "")..(t, user.as_str(), AFTER_ANY_ID))? {
            let (dk, _) = d?;
            user_devices.push(dk.value().2.to_owned());
        }
        recipients.push((user, user_devices));
    }

    let mut rows = txn.open_table(MESSAGES)?;
    let mut inbox = txn.open_table(INBOX)?;
    let mut buckets = txn.open_table(BUCKETS)?;
    for m in messages {
        rows.insert((t, c, m.seq), encode(m)?.as_slice())?;
        sent.insert(
            (t, c, m.sender_id.as_str(), m.client_msg_id.as_str()),
            m.seq,
        )?;
        for (user, user_devices) in &recipients {
            for device in user_devices {
                if *user == m.sender_id.as_str() && *device == m.sender_device.as_str() {
                    continue;
                }
                inbox.insert((t, user.as_str(), device.as_str(), c, m.seq), ())?;
            }
        }
        let day = day_bucket(m.created_at);
        let first = buckets
            .get((t, c, day))?
            .map(|v| v.value().0)
            .unwrap_or(m.seq);
        buckets.insert((t, c, day), (first, m.seq))?;
    }

    // Sending implies having read and received everything before it.
    for m in messages {
        let k = (t, c, m.sender_id.as_str());
        let current = members.get(k)?.map(|v| decode::<MemberRecord>(v.value()));
        if let Some(mut member) = current.transpose()? {
            member.read_seq = member.read_seq.max(m.seq);
            member.delivered_seq = member.delivered_seq.max(m.seq);
            members.insert(k, encode(&member)?.as_slice())?;
        }
    }

    record.last_seq = last.seq;
    record.last_activity = last.created_at;
    record.last_message = Some(last.clone());
    drop((rows, inbox, buckets, sent, members, devices));
    save_conversation(txn, &record)?;
    Ok(())
}

fn ack_delivered(
    txn: &WriteTransaction,
    tenant: &TenantId,
    user: &UserId,
    device: &DeviceId,
    conversation: &ConversationId,
    seq: u64,
) -> Result<(), ApplyError> {
    let (t, u, d, c) = (
        tenant.as_str(),
        user.as_str(),
        device.as_str(),
        conversation.as_str(),
    );
    let key = ConversationKey {
        tenant: tenant.clone(),
        conversation_id: conversation.clone(),
    };
    let Some(record) = load_conversation(txn, &key)? else {
        return Err(ApplyError::Clean(StoreError::NotFound));
    };
    let mut members = txn.open_table(MEMBERS)?;
    let current = members
        .get((t, c, u))?
        .map(|v| decode::<MemberRecord>(v.value()));
    let Some(mut member) = current.transpose()? else {
        return Err(ApplyError::Clean(StoreError::NotAMember));
    };
    // A mark past the end of the conversation would hide future messages.
    let seq = seq.min(record.last_seq);
    let mut cursors = txn.open_table(DEVICE_CURSORS)?;
    let previous = cursors.get((t, u, d, c))?.map(|v| v.value()).unwrap_or(0);
    if seq <= previous {
        return Ok(());
    }
    cursors.insert((t, u, d, c), seq)?;
    let mut inbox = txn.open_table(INBOX)?;
    inbox.retain_in((t, u, d, c, 0)..=(t, u, d, c, seq), |_, _| false)?;
    if seq > member.delivered_seq {
        member.delivered_seq = seq;
        members.insert((t, c, u), encode(&member)?.as_slice())?;
    }
    Ok(())
}
