//! Runs plugins: compiles a component once per digest and hook, and calls
//! it in a fresh store per call under the limits (I5). Nothing is kept
//! from one call to the next: a store, its instance and its memory live
//! for exactly one call, so no state leaks between messages or tenants.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::{Content, ConversationId, ConversationKind, TenantId, UserId};
use wasmtime::{Engine, Store, Trap};

use crate::compile_cache::CodeState;
pub(crate) use crate::compiled::Pre;
pub use crate::compiled::{CallError, CompileError, Compiled, Import, Origin, digest, preflight};
use crate::engine::{self, EPOCH_TICK, Permits, Ticker};
use crate::hook::{EditAction, EditRequest, Hook, ModerationInput, PreviewInput, ReactionInput};
use crate::limits::PluginLimits;
use crate::wit::{self, CallLimiter, CallState};

/// What a moderation plugin returned, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Reject(String),
    Rewrite(Content),
}

#[derive(Debug, Default)]
struct HookStats {
    calls: AtomicU64,
    failures: AtomicU64,
    /// Fuel the calls burned, failed ones included.
    fuel: AtomicU64,
}

/// Calls and failures of one hook in this process, since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Counts {
    pub calls: u64,
    pub failures: u64,
    /// Calls that succeeded but took most of their deadline
    /// (`slow_call_percent`); counted per version only (0 per hook).
    pub slow: u64,
    /// Times the version was quarantined (`quarantine_after` failures or
    /// slow calls among its last `quarantine_window`); per version only.
    pub quarantines: u64,
}

pub struct PluginHost {
    engine: Engine,
    limits: PluginLimits,
    /// Tenants' quotas, which may lower a tenant's call limits.
    tenants: std::sync::OnceLock<switchboard_nats::records::tenants::TenantBook>,
    permits: Permits,
    code: CodeState,
    stats: [HookStats; 3],
    ticker: Ticker,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot start the plugin engine: {0}")]
pub struct HostError(#[source] switchboard_nats::Cause);

/// Longest reason a plugin may give; longer ones are cut.
const MAX_REASON_BYTES: usize = 512;

impl PluginHost {
    pub fn new(limits: PluginLimits) -> Result<Self, HostError> {
        limits
            .check()
            .map_err(|e| HostError(switchboard_nats::cause(e)))?;
        let engine = engine::engine(&limits).map_err(|e| HostError(switchboard_nats::cause(e)))?;
        let ticker =
            Ticker::start(engine.clone()).map_err(|e| HostError(switchboard_nats::cause(e)))?;
        let code = CodeState::new(crate::precompiled::Precompiler::new(engine.clone()));
        Ok(Self {
            permits: Permits::new(limits.pool_size),
            engine,
            tenants: std::sync::OnceLock::new(),
            limits,
            code,
            stats: Default::default(),
            ticker,
        })
    }

    pub fn limits(&self) -> &PluginLimits {
        &self.limits
    }

    pub fn counts(&self, hook: Hook) -> Counts {
        let s = &self.stats[hook as usize];
        Counts {
            calls: s.calls.load(Ordering::Relaxed),
            failures: s.failures.load(Ordering::Relaxed),
            slow: 0,
            quarantines: 0,
        }
    }

    /// Fuel every call of `hook` in this process has burned.
    pub fn fuel_used(&self, hook: Hook) -> u64 {
        self.stats[hook as usize].fuel.load(Ordering::Relaxed)
    }

    /// Compiles and makes one trial call with made-up input, as an upload
    /// must pass before it is stored.
    pub fn validate(
        &self,
        hook: Hook,
        bytes: &[u8],
        config: &BTreeMap<String, String>,
    ) -> Result<Arc<Compiled>, CompileError> {
        self.validate_with(hook, bytes, config, None)
            .map(|(c, _)| c)
    }

    /// [`Self::validate`], loading the code from a precompiled `artifact`
    /// when it is this engine's and intact ([`Self::compile_with`]).
    pub fn validate_with(
        &self,
        hook: Hook,
        bytes: &[u8],
        config: &BTreeMap<String, String>,
        artifact: Option<&[u8]>,
    ) -> Result<(Arc<Compiled>, Origin), CompileError> {
        let (compiled, origin) = self.compile_with(hook, bytes, artifact)?;
        self.trial(&compiled, config)?;
        Ok((compiled, origin))
    }

    /// One call of a compiled component with made-up input, which every
    /// upload must pass.
    pub fn trial(
        &self,
        compiled: &Compiled,
        config: &BTreeMap<String, String>,
    ) -> Result<(), CompileError> {
        let hook = compiled.hook;
        let config = Arc::new(config.clone());
        let trial = Trial::new().map_err(CompileError::TrialInput)?;
        let (tenant, user, conversation) =
            (&trial.tenant, &trial.user, &trial.message.conversation_id);
        let result = match hook {
            Hook::Moderation => self
                .moderate(
                    compiled,
                    &config,
                    &ModerationInput {
                        tenant,
                        conversation_id: conversation,
                        kind: ConversationKind::Group,
                        member_count: 3,
                        sender: user,
                        content: &Content::Text {
                            text: "hello".into(),
                        },
                        options: &SendOptions {
                            mentions: vec![user.clone()],
                            ..SendOptions::default()
                        },
                    },
                    &ContentLimits::default(),
                )
                .and_then(|_| {
                    self.moderate_reaction(
                        compiled,
                        &config,
                        &ReactionInput {
                            tenant,
                            conversation_id: conversation,
                            kind: ConversationKind::Group,
                            member_count: 3,
                            sender: user,
                            message_id: trial.message.message_id,
                            emoji: "👍",
                        },
                    )
                })
                .and_then(|_| {
                    self.moderate_preview(
                        compiled,
                        &config,
                        &PreviewInput {
                            tenant,
                            conversation_id: conversation,
                            kind: ConversationKind::Group,
                            member_count: 3,
                            sender: user,
                            message_id: trial.message.message_id,
                            card: &trial.card,
                        },
                    )
                })
                .map(drop),
            Hook::EditPolicy => self
                .edit(
                    compiled,
                    &config,
                    &EditRequest {
                        tenant,
                        action: EditAction::Edit,
                        actor: user,
                        actor_is_admin: false,
                        message: &trial.message,
                        now: switchboard_protocol::Timestamp::now(),
                    },
                )
                .map(drop),
            Hook::FanOut => self
                .fan_out(compiled, &config, tenant, ConversationKind::Group, 3)
                .map(drop),
        };
        result.map_err(CompileError::TrialCall)
    }

    /// Runs the moderation hook. `Ok(None)` for content plugins never see
    /// (ciphertext).
    pub fn moderate(
        &self,
        compiled: &Compiled,
        config: &Arc<BTreeMap<String, String>>,
        input: &ModerationInput<'_>,
        limits: &ContentLimits,
    ) -> Result<Option<Verdict>, CallError> {
        // The message record differs between the packages (0.2.0 adds
        // reply, thread and mentions, 0.3.0 the `custom` fields, 0.4.0
        // is 0.3.0's); the call and the verdict do not.
        macro_rules! moderate {
            ($pre:expr, $to:path, $from:path, $kind:path, $($m:ident)::+ { $($extra:tt)* }) => {{
                let Some(content) = $to(input.content) else {
                    return Ok(None);
                };
                use $($m)::+ as m;
                let message = m::Message {
                    tenant: input.tenant.as_str().to_owned(),
                    conversation_id: input.conversation_id.as_str().to_owned(),
                    conversation_kind: $kind(input.kind),
                    member_count: count(input.member_count),
                    sender: input.sender.as_str().to_owned(),
                    content,
                    $($extra)*
                };
                let verdict = self.call(compiled, input.tenant, config, |store| {
                    let instance = $pre.instantiate(&mut *store)?;
                    instance
                        .switchboard_plugin_moderation()
                        .call_moderate(&mut *store, &message)
                })?;
                match verdict {
                    m::Verdict::Allow => Verdict::Allow,
                    m::Verdict::Reject(reason) => Verdict::Reject(cut(reason)),
                    m::Verdict::Rewrite(c) => {
                        let c = $from(c).map_err(|e| CallError::Output(format!("rewritten content: {e}")))?;
                        Verdict::Rewrite(crate::rewrite::rewritten(input.content, c))
                    }
                }
            }};
        }
        let o = input.options;
        let verdict = match &compiled.pre {
            Pre::ModerationV4(pre) => moderate!(
                pre,
                wit::content_to_wit_v4,
                wit::content_from_wit_v4,
                wit::kind_v4,
                wit::v4::exports::switchboard::plugin::moderation {
                    reply_to: o.reply_to.map(|id| id.to_string()),
                    thread_id: o.thread_id.map(|id| id.to_string()),
                    mentions: o.mentions.iter().map(|u| u.as_str().to_owned()).collect(),
                    mention_all: o.mention_all,
                    custom: o
                        .custom
                        .as_ref()
                        .filter(|c| !c.is_empty())
                        .map(|c| serde_json::Value::Object(c.clone()).to_string()),
                }
            ),
            Pre::ModerationV3(pre) => moderate!(
                pre,
                wit::content_to_wit_v3,
                wit::content_from_wit_v3,
                wit::kind_v3,
                wit::v3::exports::switchboard::plugin::moderation {
                    reply_to: o.reply_to.map(|id| id.to_string()),
                    thread_id: o.thread_id.map(|id| id.to_string()),
                    mentions: o.mentions.iter().map(|u| u.as_str().to_owned()).collect(),
                    mention_all: o.mention_all,
                    custom: o
                        .custom
                        .as_ref()
                        .filter(|c| !c.is_empty())
                        .map(|c| serde_json::Value::Object(c.clone()).to_string()),
                }
            ),
            Pre::ModerationV2(pre) => moderate!(
                pre,
                wit::content_to_wit_v2,
                wit::content_from_wit_v2,
                wit::kind_v2,
                wit::v2::exports::switchboard::plugin::moderation {
                    reply_to: o.reply_to.map(|id| id.to_string()),
                    thread_id: o.thread_id.map(|id| id.to_string()),
                    mentions: o.mentions.iter().map(|u| u.as_str().to_owned()).collect(),
                    mention_all: o.mention_all,
                }
            ),
            Pre::Moderation(pre) => moderate!(
                pre,
                wit::content_to_wit,
                wit::content_from_wit,
                wit::kind,
                wit::exports::switchboard::plugin::moderation {}
            ),
            _ => return Err(CallError::Instantiate("not a moderation plugin".into())),
        };
        if let Verdict::Rewrite(content) = &verdict {
            content
                .validate_from_client(limits)
                .map_err(|e| CallError::Output(format!("rewritten content: {e}")))?;
        }
        Ok(Some(verdict))
    }

    /// Runs the moderation hook over a reaction being added: `Ok(None)`
    /// where the plugin sees no reactions (a 0.1.0 moderator), else
    /// `Ok(Err(reason))` for a refusal.
    pub fn moderate_reaction(
        &self,
        compiled: &Compiled,
        config: &Arc<BTreeMap<String, String>>,
        input: &ReactionInput<'_>,
    ) -> Result<Option<Result<(), String>>, CallError> {
        // The same record and call from 0.2.0 on, each its bindings.
        macro_rules! react {
            ($pre:expr, $kind:path, $($m:ident)::+) => {{
                use $($m)::+ as m;
                let reaction = m::Reaction {
                    tenant: input.tenant.as_str().to_owned(),
                    conversation_id: input.conversation_id.as_str().to_owned(),
                    conversation_kind: $kind(input.kind),
                    member_count: count(input.member_count),
                    sender: input.sender.as_str().to_owned(),
                    message_id: input.message_id.to_string(),
                    emoji: input.emoji.to_owned(),
                };
                let verdict = self.call(compiled, input.tenant, config, |store| {
                    let instance = $pre.instantiate(&mut *store)?;
                    instance
                        .switchboard_plugin_moderation()
                        .call_moderate_reaction(&mut *store, &reaction)
                })?;
                match verdict {
                    m::ReactionVerdict::Allow => Ok(()),
                    m::ReactionVerdict::Reject(reason) => Err(cut(reason)),
                }
            }};
        }
        Ok(Some(match &compiled.pre {
            Pre::ModerationV4(pre) => react!(
                pre,
                wit::kind_v4,
                wit::v4::exports::switchboard::plugin::moderation
            ),
            Pre::ModerationV3(pre) => react!(
                pre,
                wit::kind_v3,
                wit::v3::exports::switchboard::plugin::moderation
            ),
            Pre::ModerationV2(pre) => react!(
                pre,
                wit::kind_v2,
                wit::v2::exports::switchboard::plugin::moderation
            ),
            Pre::Moderation(_) => return Ok(None),
            _ => return Err(CallError::Instantiate("not a moderation plugin".into())),
        }))
    }

    /// Runs the edit-policy hook: `Ok(Err(reason))` is a denial.
    pub fn edit(
        &self,
        compiled: &Compiled,
        config: &Arc<BTreeMap<String, String>>,
        request: &EditRequest<'_>,
    ) -> Result<Result<(), String>, CallError> {
        // The interface is the same in every package: one body, written
        // against each version's bindings.
        macro_rules! decide {
            ($pre:expr, $($e:ident)::+) => {{
                use $($e)::+ as e;
                let m = request.message;
                let wit_request = e::Request {
                    tenant: request.tenant.as_str().to_owned(),
                    conversation_id: m.conversation_id.as_str().to_owned(),
                    action: match request.action {
                        EditAction::Edit => e::Action::Edit,
                        EditAction::Delete => e::Action::Delete,
                    },
                    actor: request.actor.as_str().to_owned(),
                    actor_is_admin: request.actor_is_admin,
                    sender: m.sender_id.as_str().to_owned(),
                    seq: m.seq,
                    created_at_ms: m.created_at.unix_ms(),
                    edited_at_ms: m.edited_at.map(|t| t.unix_ms()),
                    now_ms: request.now.unix_ms(),
                };
                let decision = self.call(compiled, request.tenant, config, |store| {
                    let instance = $pre.instantiate(&mut *store)?;
                    instance
                        .switchboard_plugin_edit_policy()
                        .call_decide(&mut *store, &wit_request)
                })?;
                match decision {
                    e::Decision::Allow => Ok(()),
                    e::Decision::Deny(reason) => Err(cut(reason)),
                }
            }};
        }
        Ok(match &compiled.pre {
            Pre::EditPolicyV4(pre) => decide!(
                pre,
                wit::v4::edit::exports::switchboard::plugin::edit_policy
            ),
            Pre::EditPolicyV3(pre) => decide!(
                pre,
                wit::v3::edit::exports::switchboard::plugin::edit_policy
            ),
            Pre::EditPolicyV2(pre) => decide!(
                pre,
                wit::v2::edit::exports::switchboard::plugin::edit_policy
            ),
            Pre::EditPolicy(pre) => {
                decide!(pre, wit::edit::exports::switchboard::plugin::edit_policy)
            }
            _ => return Err(CallError::Instantiate("not an edit-policy plugin".into())),
        })
    }

    /// Runs the fan-out hook.
    pub fn fan_out(
        &self,
        compiled: &Compiled,
        config: &Arc<BTreeMap<String, String>>,
        tenant: &TenantId,
        kind: ConversationKind,
        member_count: usize,
    ) -> Result<crate::fanout::FanOut, CallError> {
        // As for `edit`: one body, each version's bindings.
        macro_rules! choose {
            ($pre:expr, $kind:expr, $($f:ident)::+) => {{
                use $($f)::+ as f;
                let conversation = f::Conversation {
                    tenant: tenant.as_str().to_owned(),
                    conversation_kind: $kind,
                    member_count: count(member_count),
                };
                let mode = self.call(compiled, tenant, config, |store| {
                    let instance = $pre.instantiate(&mut *store)?;
                    instance
                        .switchboard_plugin_fan_out()
                        .call_choose(&mut *store, &conversation)
                })?;
                match mode {
                    f::Mode::OnWrite => crate::fanout::FanOut::Write,
                    f::Mode::OnRead => crate::fanout::FanOut::Read,
                }
            }};
        }
        Ok(match &compiled.pre {
            Pre::FanOutV4(pre) => choose!(
                pre,
                wit::kind_v4(kind),
                wit::v4::fan_out::exports::switchboard::plugin::fan_out
            ),
            Pre::FanOutV3(pre) => choose!(
                pre,
                wit::kind_v3(kind),
                wit::v3::fan_out::exports::switchboard::plugin::fan_out
            ),
            Pre::FanOutV2(pre) => choose!(
                pre,
                wit::kind_v2(kind),
                wit::v2::fan_out::exports::switchboard::plugin::fan_out
            ),
            Pre::FanOut(pre) => choose!(
                pre,
                wit::kind(kind),
                wit::fan_out::exports::switchboard::plugin::fan_out
            ),
            _ => return Err(CallError::Instantiate("not a fan-out plugin".into())),
        })
    }

    /// From now on, a tenant's plugin quotas in `tenants` lower its calls'
    /// deadline, fuel and memory (set once, at start-up).
    pub fn follow_tenant_quotas(&self, tenants: switchboard_nats::records::tenants::TenantBook) {
        let _ = self.tenants.set(tenants);
    }

    /// The limits of one call of `tenant`: the deployment's, lowered by the
    /// tenant's quotas.
    pub(crate) fn call_limits(&self, tenant: &TenantId) -> (Duration, u64, usize) {
        let l = &self.limits;
        let Some(q) = self.tenants.get().map(|t| t.quotas(tenant)) else {
            return (l.deadline, l.fuel, l.memory_bytes);
        };
        let deadline = q.plugin_deadline_ms.map_or(l.deadline, |ms| {
            l.deadline.min(Duration::from_millis(u64::from(ms)))
        });
        let fuel = q.plugin_fuel.map_or(l.fuel, |f| l.fuel.min(f));
        let memory = q.plugin_memory_bytes.map_or(l.memory_bytes, |m| {
            l.memory_bytes.min(usize::try_from(m).unwrap_or(usize::MAX))
        });
        (deadline, fuel, memory)
    }

    /// One call in a fresh store under every limit.
    pub(crate) fn call<R>(
        &self,
        compiled: &Compiled,
        tenant: &TenantId,
        config: &Arc<BTreeMap<String, String>>,
        f: impl FnOnce(&mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let stats = &self.stats[compiled.hook as usize];
        stats.calls.fetch_add(1, Ordering::Relaxed);
        let _permit = self.permits.acquire();
        let (deadline, fuel, memory_bytes) = self.call_limits(tenant);
        let mut store = Store::new(
            &self.engine,
            CallState {
                tenant: tenant.clone(),
                hook: compiled.hook,
                digest: compiled.digest.clone(),
                config: config.clone(),
                log_lines: 0,
                max_log_lines: self.limits.max_log_lines,
                max_log_line_bytes: self.limits.max_log_line_bytes,
                limiter: CallLimiter {
                    memory_bytes,
                    table_elements: self.limits.table_elements,
                    refused: false,
                },
                started: std::time::SystemTime::now(),
                wasi: None,
            },
        );
        store.limiter(|s| &mut s.limiter);
        // The epoch advances while this is held (and any other call runs).
        let _ticking = self.ticker.call();
        let ticks = (deadline.as_micros() / EPOCH_TICK.as_micros()).max(1) as u64;
        // One tick more: the epoch may advance just after the deadline is set.
        store.set_epoch_deadline(ticks + 1);
        store.epoch_deadline_trap();
        let result = store.set_fuel(fuel).and_then(|()| f(&mut store));
        let left = store.get_fuel().unwrap_or(fuel);
        stats
            .fuel
            .fetch_add(fuel.saturating_sub(left), Ordering::Relaxed);
        result.map_err(|e| {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            classify(&e, store.data().limiter.refused, deadline)
        })
    }
}

/// What a failed call ran into; `deadline` is the call's own.
fn classify(e: &wasmtime::Error, over_cap: bool, deadline: Duration) -> CallError {
    if over_cap {
        return CallError::Memory;
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Deadline(deadline),
        Some(Trap::OutOfFuel) => CallError::Fuel,
        Some(Trap::StackOverflow) => CallError::Stack,
        Some(trap) => CallError::Trap(trap.to_string()),
        // Calling an import linked to a trap (WASI), among others.
        None => CallError::Trap(format!("{e:#}")),
    }
}

impl PluginHost {
    pub(crate) fn code_state(&self) -> &CodeState {
        &self.code
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// A member count as WIT's `u32` (saturating: no conversation is that
/// large, and a plugin should never see a wrapped one).
fn count(members: usize) -> u32 {
    u32::try_from(members).unwrap_or(u32::MAX)
}

fn cut(mut reason: String) -> String {
    if reason.len() > MAX_REASON_BYTES {
        let mut at = MAX_REASON_BYTES;
        while !reason.is_char_boundary(at) {
            at -= 1;
        }
        reason.truncate(at);
    }
    reason
}

/// The made-up input of an upload's trial call.
struct Trial {
    tenant: TenantId,
    user: UserId,
    message: switchboard_protocol::Message,
    card: switchboard_protocol::previews::LinkPreview,
}

impl Trial {
    fn new() -> Result<Self, switchboard_protocol::ids::IdError> {
        use switchboard_protocol::{ClientMsgId, DeviceId, Message, MessageId, Timestamp};
        let user = UserId::new("trial-user")?;
        Ok(Self {
            tenant: TenantId::new("trial")?,
            message: Message::plain(
                MessageId::from_u64(1),
                ConversationId::new("trial-conversation")?,
                1,
                user.clone(),
                DeviceId::default_device(),
                ClientMsgId::new("trial")?,
                Some(Content::Text {
                    text: "hello".into(),
                }),
                Timestamp::now(),
            ),
            card: switchboard_protocol::previews::LinkPreview {
                url: "https://example.com/".into(),
                title: Some("Example Domain".into()),
                description: None,
                site_name: None,
                image: None,
            },
            user,
        })
    }
}
