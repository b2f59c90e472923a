//! What the sequencer's files share, imported by each with
//! `use super::prelude::*`: the types of the backbone, the protocol and
//! the store a command works with, the sequencer's inputs and outputs
//! (`plan.rs`) and the keys commands address rows by (`keys.rs`).

pub(super) use std::collections::{BTreeSet, HashMap, HashSet};

pub(super) use switchboard_nats::envelope::{
    Command, CommandReply, CreateConversationCommand, MembersCommand, Rejection, SendCommand,
    UpdateCommand,
};
pub(super) use switchboard_nats::node_id::IdSource;
pub(super) use switchboard_protocol::content::SystemEvent;
pub(super) use switchboard_protocol::frames::request_type;
pub(super) use switchboard_protocol::snowflake::decompose;
pub(super) use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, ErrorCode, Message,
    MessageId, ServerFrame, TenantId, Timestamp, UserId,
};
pub(super) use switchboard_store::{
    ConversationKey, ConversationRecord, MessageKey, Mutation, SentKey, SequencerState, Store,
};

pub(super) use switchboard_plugin_host::fanout::FanOut;

pub(super) use crate::policy::{Action, Policies};

pub(super) use super::keys::{
    conversation_key, key, message_key, sent_key, system_client_msg_id, users_where,
};
pub(super) use super::plan::{Incoming, LastSent, Outcome, Route, SequenceError};
