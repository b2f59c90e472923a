//! Runs plugins: compiles a component once per digest and hook, and calls
//! it in a fresh store per call under the limits (I5). Nothing is kept
//! from one call to the next: a store, its instance and its memory live
//! for exactly one call, so no state leaks between messages or tenants.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::{Content, ConversationId, ConversationKind, TenantId, UserId};
use wasmtime::{Engine, Store, Trap};

use crate::compile_cache::CodeState;
pub(crate) use crate::compiled::Pre;
pub use crate::compiled::{CallError, CompileError, Compiled, Import, Origin, digest, preflight};
use crate::engine::{self, EPOCH_TICK, Permits, Ticker};
use crate::hook::{EditAction, EditRequest, Hook, ModerationInput};
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
    _ticker: Ticker,
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
            _ticker: ticker,
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
                    },
                    &ContentLimits::default(),
                )
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
        let Pre::Moderation(pre) = &compiled.pre else {
            return Err(CallError::Instantiate("not a moderation plugin".into()));
        };
        let Some(content) = wit::content_to_wit(input.content) else {
            return Ok(None);
        };
        use wit::exports::switchboard::plugin::moderation as m;
        let message = m::Message {
            tenant: input.tenant.as_str().to_owned(),
            conversation_id: input.conversation_id.as_str().to_owned(),
            conversation_kind: wit::kind(input.kind),
            member_count: u32::try_from(input.member_count).unwrap_or(u32::MAX),
            sender: input.sender.as_str().to_owned(),
            content,
        };
        let verdict = self.call(compiled, input.tenant, config, |store| {
            let instance = pre.instantiate(&mut *store)?;
            instance
                .switchboard_plugin_moderation()
                .call_moderate(&mut *store, &message)
        })?;
        Ok(Some(match verdict {
            m::Verdict::Allow => Verdict::Allow,
            m::Verdict::Reject(reason) => Verdict::Reject(cut(reason)),
            m::Verdict::Rewrite(content) => {
                let content = wit::content_from_wit(content);
                content
                    .validate_from_client(limits)
                    .map_err(|e| CallError::Output(format!("rewritten content: {e}")))?;
                Verdict::Rewrite(content)
            }
        }))
    }

    /// Runs the edit-policy hook: `Ok(Err(reason))` is a denial.
    pub fn edit(
        &self,
        compiled: &Compiled,
        config: &Arc<BTreeMap<String, String>>,
        request: &EditRequest<'_>,
    ) -> Result<Result<(), String>, CallError> {
        let Pre::EditPolicy(pre) = &compiled.pre else {
            return Err(CallError::Instantiate("not an edit-policy plugin".into()));
        };
        use wit::edit::exports::switchboard::plugin::edit_policy as e;
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
            let instance = pre.instantiate(&mut *store)?;
            instance
                .switchboard_plugin_edit_policy()
                .call_decide(&mut *store, &wit_request)
        })?;
        Ok(match decision {
            e::Decision::Allow => Ok(()),
            e::Decision::Deny(reason) => Err(cut(reason)),
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
        let Pre::FanOut(pre) = &compiled.pre else {
            return Err(CallError::Instantiate("not a fan-out plugin".into()));
        };
        use wit::fan_out::exports::switchboard::plugin::fan_out as f;
        let conversation = f::Conversation {
            tenant: tenant.as_str().to_owned(),
            conversation_kind: wit::kind(kind),
            member_count: u32::try_from(member_count).unwrap_or(u32::MAX),
        };
        let mode = self.call(compiled, tenant, config, |store| {
            let instance = pre.instantiate(&mut *store)?;
            instance
                .switchboard_plugin_fan_out()
                .call_choose(&mut *store, &conversation)
        })?;
        Ok(match mode {
            f::Mode::OnWrite => crate::fanout::FanOut::Write,
            f::Mode::OnRead => crate::fanout::FanOut::Read,
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
    fn call<R>(
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
}

impl Trial {
    fn new() -> Result<Self, switchboard_protocol::ids::IdError> {
        use switchboard_protocol::{ClientMsgId, DeviceId, Message, MessageId, Timestamp};
        let user = UserId::new("trial-user")?;
        Ok(Self {
            tenant: TenantId::new("trial")?,
            message: Message {
                message_id: MessageId::from_u64(1),
                conversation_id: ConversationId::new("trial-conversation")?,
                seq: 1,
                sender_id: user.clone(),
                sender_device: DeviceId::default_device(),
                client_msg_id: ClientMsgId::new("trial")?,
                content: Some(Content::Text {
                    text: "hello".into(),
                }),
                created_at: Timestamp::now(),
                edited_at: None,
                deleted_at: None,
            },
            user,
        })
    }
}
