//! `switchboard plugin`: a plugin author's local harness, with the host
//! that runs plugins in production and its limits.
//! - `check FILE`: what a deploy checks before it stores anything: the
//!   size, the hook's world, the imports, and a trial call.
//! - `call FILE --hook H --input SAMPLE`: one hook call with the sample's
//!   input, printing the decision, the time and the fuel it took.
//!
//! Both print one JSON object on stdout and exit 1 when the component
//! would be refused or the call fails. The plugin's own log lines go to
//! stderr.
//!
//! Both compile a component once: its code is kept in a cache directory
//! (`plugin_cache.rs`) and loaded on every later run, so a call of an
//! unchanged JavaScript plugin answers in well under a second. The report
//! says where the code came from (`"code"`: `compiled` or `precompiled`)
//! and what the cache did (`"cache"`: `hit`, `stored`, `miss`, `off`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, anyhow, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_plugin_host::code::Code;
use switchboard_plugin_host::fanout::FanOut;
use switchboard_plugin_host::host::{Compiled, Origin, Verdict};
use switchboard_plugin_host::preview::PreviewVerdict;
use switchboard_plugin_host::{
    EditAction, EditRequest, Hook, ModerationInput, PluginHost, PreviewInput, ReactionInput,
};
use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::previews::LinkPreview;
use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, ConversationKind, DeviceId, Message, MessageId, TenantId,
    Timestamp, UserId,
};

use crate::config::FileConfig;
use crate::plugin_cache::PluginCache;

#[derive(clap::Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    command: PluginCmd,
}

#[derive(clap::Subcommand)]
enum PluginCmd {
    /// Check a component as a deploy would: its size, its hook's world,
    /// its imports, and a trial call.
    Check(CheckArgs),
    /// Run one hook call with a sample input under the production limits;
    /// print the decision, the time and the fuel.
    Call(CallArgs),
    /// Start a plugin project for a hook, with the SDK, an example and a
    /// sample input; it builds with `cargo build --release`.
    New(NewArgs),
}

#[derive(clap::Args)]
struct NewArgs {
    /// The hook: moderation, edit_policy or fan_out.
    hook: String,
    /// The project's directory, new or empty; its name names the plugin.
    dir: PathBuf,
    /// The plugin's language: rust, or js (a moderator).
    #[arg(long, value_enum, default_value = "rust")]
    language: crate::plugin_template::Language,
}

#[derive(clap::Args)]
struct Component {
    /// The component (`.wasm`).
    file: PathBuf,
    /// A configuration value of the plugin, `KEY=VALUE` (what a deploy's
    /// `config.<key>` sets); repeat for more.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// A Switchboard configuration file whose `[plugins]` limits to run
    /// under (default: the defaults).
    #[arg(long, env = "SWITCHBOARD_CONFIG")]
    config: Option<PathBuf>,
    /// Where compiled components are kept between runs (default:
    /// `$XDG_CACHE_HOME/switchboard/plugins`, else
    /// `~/.cache/switchboard/plugins`).
    #[arg(long, env = "SWITCHBOARD_PLUGIN_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Bytes the cache may take; past it the least recently used
    /// components are deleted (a JavaScript engine's code is about 55 MB).
    #[arg(long, env = "SWITCHBOARD_PLUGIN_CACHE_MAX_BYTES", default_value_t = 1 << 30)]
    cache_max_bytes: u64,
    /// Compile without reading or writing the cache.
    #[arg(long)]
    no_cache: bool,
}

impl Component {
    fn cache(&self) -> Option<PluginCache> {
        if self.no_cache {
            return None;
        }
        let dir = self.cache_dir.clone().or_else(PluginCache::default_dir)?;
        Some(PluginCache::new(dir, self.cache_max_bytes))
    }
}

/// The component's code: from the cache when it holds this engine's, else
/// compiled (and then kept there), with what the cache did.
fn cached_code(
    host: &PluginHost,
    bytes: &[u8],
    cache: Option<&PluginCache>,
) -> Result<(Code, &'static str), switchboard_plugin_host::host::CompileError> {
    let Some(cache) = cache else {
        return Ok((host.code(bytes, None)?, "off"));
    };
    let digest = switchboard_plugin_host::deploy::digest(bytes);
    let fingerprint = host.fingerprint().as_str();
    let max = host.limits().max_precompiled_bytes;
    let artifact = cache.read(&digest, fingerprint, max);
    let code = host.code(bytes, artifact.as_deref())?;
    if code.origin == Origin::Precompiled {
        return Ok((code, "hit"));
    }
    if artifact.is_some() {
        // The host refused it (it says why on stderr): replaced below.
        cache.remove(&digest, fingerprint);
    }
    let stored = host
        .seal_code(&code)
        .map_err(|e| e.to_string())
        .and_then(|artifact| {
            cache
                .write(&digest, fingerprint, &artifact)
                .map_err(|e| format!("{}: {e}", cache.dir().display()))
        });
    match stored {
        Ok(()) => Ok((code, "stored")),
        Err(e) => {
            eprintln!("the compiled component was not cached: {e}");
            Ok((code, "miss"))
        }
    }
}

#[derive(clap::Args)]
struct CheckArgs {
    #[command(flatten)]
    component: Component,
    /// The hook: moderation, edit_policy or fan_out (default: whichever
    /// the component fits).
    #[arg(long)]
    hook: Option<String>,
}

#[derive(clap::Args)]
struct CallArgs {
    #[command(flatten)]
    component: Component,
    /// The hook: moderation, edit_policy or fan_out.
    #[arg(long)]
    hook: String,
    /// The call's input as JSON, `-` for stdin (plugins/README.md, "Test
    /// it locally", shows one per hook).
    #[arg(long)]
    input: PathBuf,
    /// Make the call this many times (each in a fresh instance, as in
    /// production) and also report the median time: the first call of a
    /// process pays for setting up its memory.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

/// Prints the report; `false` when the component would be refused or the
/// call failed (the process then exits 1).
pub fn run(args: PluginArgs) -> anyhow::Result<bool> {
    let (report, passed) = match args.command {
        PluginCmd::Check(a) => check(&a)?,
        PluginCmd::Call(a) => call(&a)?,
        PluginCmd::New(a) => {
            let hook = hook_named(&a.hook)?;
            let name = crate::plugin_template::create(hook, a.language, &a.dir)?;
            let build = match a.language {
                crate::plugin_template::Language::Rust => "cargo build --release",
                crate::plugin_template::Language::Js => "npm ci && npm run build",
            };
            let report = json!({
                "ok": true,
                "plugin": name,
                "hook": hook.as_str(),
                "dir": a.dir.display().to_string(),
                "build": build,
            });
            (report, true)
        }
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    if let Some(error) = report["error"].as_str() {
        eprintln!("{error}");
    }
    Ok(passed)
}

/// A plugin's configuration values, as a version carries them.
type PluginConfig = Arc<BTreeMap<String, String>>;

/// The host with the limits of `config` (or the defaults), the
/// component's bytes and the plugin's configuration.
fn load(c: &Component) -> anyhow::Result<(PluginHost, Vec<u8>, PluginConfig)> {
    let file = FileConfig::load(c.config.as_deref())?;
    let host = PluginHost::new(file.plugins.unwrap_or_default())?;
    let bytes = std::fs::read(&c.file).with_context(|| format!("reading {}", c.file.display()))?;
    let mut config = BTreeMap::new();
    for kv in &c.set {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--set takes KEY=VALUE, not {kv:?}");
        };
        config.insert(k.to_owned(), v.to_owned());
    }
    Ok((host, bytes, Arc::new(config)))
}

fn hook_named(name: &str) -> anyhow::Result<Hook> {
    Hook::parse(name).ok_or_else(|| {
        anyhow!("no hook {name:?}; the hooks are moderation, edit_policy and fan_out")
    })
}

fn check(args: &CheckArgs) -> anyhow::Result<(Value, bool)> {
    let (host, bytes, config) = load(&args.component)?;
    let mut report = json!({
        "file": args.component.file.display().to_string(),
        "bytes": bytes.len(),
        "max_bytes": host.limits().max_component_bytes,
        "digest": switchboard_plugin_host::deploy::digest(&bytes),
    });
    let refused = |mut report: Value, error: String| {
        report["ok"] = json!(false);
        report["error"] = json!(error);
        Ok((report, false))
    };
    // Compiled once, whichever hooks it is tried against.
    let cache = args.component.cache();
    let code = match cached_code(&host, &bytes, cache.as_ref()) {
        Ok((code, cached)) => {
            report["code"] = json!(code.origin.as_str());
            report["cache"] = json!(cached);
            code
        }
        Err(e) => return refused(report, e.to_string()),
    };
    report["imports"] = json!(host.imports_of(&code));
    let hooks = match &args.hook {
        Some(name) => vec![hook_named(name)?],
        None => Hook::ALL.to_vec(),
    };
    // The first hook whose world the component fits; every misfit's
    // reason when none does.
    let mut misfits = Vec::new();
    let Some(compiled) = hooks
        .into_iter()
        .find_map(|hook| match host.link(hook, &code) {
            Ok(compiled) => Some(compiled),
            Err(e) => {
                misfits.push(e.to_string());
                None
            }
        })
    else {
        return refused(report, misfits.join("; "));
    };
    report["hook"] = json!(compiled.hook.as_str());
    report["world"] = json!(compiled.world());
    if let Err(e) = host.trial(&compiled, &config) {
        return refused(report, e.to_string());
    }
    report["trial_call"] = json!("passed");
    report["ok"] = json!(true);
    Ok((report, true))
}

/// `moderation`'s sample: a message's content (with its reply, thread,
/// mentions and, v1.3, its `custom` fields), or a reaction's `emoji` (with the `message_id` it is
/// on); the rest as it would be in a group of three unless given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModerationSample {
    content: Option<Content>,
    emoji: Option<String>,
    /// A link preview's card (v1.3, package 0.4.0).
    preview: Option<LinkPreview>,
    message_id: Option<MessageId>,
    tenant: Option<TenantId>,
    conversation_id: Option<ConversationId>,
    kind: Option<ConversationKind>,
    member_count: Option<usize>,
    sender: Option<UserId>,
    reply_to: Option<MessageId>,
    thread_id: Option<MessageId>,
    #[serde(default)]
    mentions: Vec<UserId>,
    #[serde(default)]
    mention_all: bool,
    custom: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `edit_policy`'s sample: who does what to which message, and when.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditSample {
    #[serde(default)]
    action: SampleAction,
    actor: Option<UserId>,
    #[serde(default)]
    actor_is_admin: bool,
    /// The message's sender (default: the actor).
    sender: Option<UserId>,
    seq: Option<u64>,
    created_at: Option<Timestamp>,
    edited_at: Option<Timestamp>,
    now: Option<Timestamp>,
    tenant: Option<TenantId>,
    conversation_id: Option<ConversationId>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum SampleAction {
    #[default]
    Edit,
    Delete,
}

/// `fan_out`'s sample: the conversation's kind and size.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FanOutSample {
    kind: Option<ConversationKind>,
    member_count: usize,
    tenant: Option<TenantId>,
}

fn read_input(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        return std::io::read_to_string(std::io::stdin()).context("reading the input from stdin");
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn sample<T: serde::de::DeserializeOwned>(text: &str, hook: Hook) -> anyhow::Result<T> {
    serde_json::from_str(text)
        .with_context(|| format!("the input is not a {hook} sample (plugins/README.md)"))
}

fn call(args: &CallArgs) -> anyhow::Result<(Value, bool)> {
    let hook = hook_named(&args.hook)?;
    let (host, bytes, config) = load(&args.component)?;
    let input = read_input(&args.input)?;
    let cache = args.component.cache();
    let compiled = cached_code(&host, &bytes, cache.as_ref())
        .and_then(|(code, cached)| Ok((host.link(hook, &code)?, code.origin, cached)));
    let (compiled, origin, cached) = match compiled {
        Ok(c) => c,
        Err(e) => {
            let report = json!({ "hook": hook.as_str(), "ok": false, "error": e.to_string() });
            return Ok((report, false));
        }
    };
    let fuel_before = host.fuel_used(hook);
    let started = Instant::now();
    let decision = match decide(&host, &compiled, &config, hook, &input) {
        Ok(decision) => decision,
        Err(e) => {
            let report = json!({ "hook": hook.as_str(), "ok": false, "error": format!("{e:#}") });
            return Ok((report, false));
        }
    };
    let took = started.elapsed();
    let fuel = host.fuel_used(hook) - fuel_before;
    let micros = |d: std::time::Duration| (d.as_nanos() as f64 / 100.0).round() / 10.0;
    let mut report = json!({
        "hook": hook.as_str(),
        "code": origin.as_str(),
        "cache": cached,
        "micros": micros(took),
        "fuel": fuel,
        "limits": {
            "deadline_ms": host.limits().deadline.as_millis() as u64,
            "fuel": host.limits().fuel,
            "memory_bytes": host.limits().memory_bytes,
        },
    });
    if args.repeat > 1 {
        let mut times = vec![took];
        for _ in 1..args.repeat {
            let started = Instant::now();
            // Each call decides alike: a fresh instance, the same input.
            let _ = decide(&host, &compiled, &config, hook, &input)?;
            times.push(started.elapsed());
        }
        times.sort_unstable();
        report["calls"] = json!(args.repeat);
        report["median_micros"] = json!(micros(times[times.len() / 2]));
    }
    match decision {
        Ok(decision) => {
            report["ok"] = json!(true);
            report["decision"] = decision;
            Ok((report, true))
        }
        Err(failure) => {
            report["ok"] = json!(false);
            report["error"] = json!(format!("the call failed: {failure}"));
            Ok((report, false))
        }
    }
}

/// Runs the hook on the sample: the decision as JSON, or why the call
/// failed (a trap or a limit).
fn decide(
    host: &PluginHost,
    compiled: &Compiled,
    config: &PluginConfig,
    hook: Hook,
    input: &str,
) -> anyhow::Result<Result<Value, String>> {
    let local = || TenantId::new("local");
    let conversation = || ConversationId::new("local-conversation");
    let alice = || UserId::new("alice");
    Ok(match hook {
        Hook::Moderation => {
            let s: ModerationSample = sample(input, hook)?;
            let tenant = s.tenant.map_or_else(local, Ok)?;
            let conversation_id = s.conversation_id.map_or_else(conversation, Ok)?;
            let sender = s.sender.map_or_else(alice, Ok)?;
            let kind = s.kind.unwrap_or(ConversationKind::Group);
            let member_count = s.member_count.unwrap_or(3);
            let content = match (s.content, s.emoji, s.preview) {
                (Some(content), None, None) => content,
                (None, None, Some(card)) => {
                    let input = PreviewInput {
                        tenant: &tenant,
                        conversation_id: &conversation_id,
                        kind,
                        member_count,
                        sender: &sender,
                        message_id: s.message_id.unwrap_or(MessageId::from_u64(1)),
                        card: &card,
                    };
                    return Ok(host
                        .moderate_preview(compiled, config, &input)
                        .map(|verdict| match verdict {
                            None => json!({
                                "verdict": "not_called",
                                "why": "a moderator of switchboard:plugin@0.3.0 or older sees no link previews"
                            }),
                            Some(PreviewVerdict::Allow) => json!({ "verdict": "allow" }),
                            Some(PreviewVerdict::Drop) => json!({ "verdict": "drop" }),
                            Some(PreviewVerdict::Rewrite(card)) => {
                                json!({ "verdict": "rewrite", "card": card })
                            }
                        })
                        .map_err(|e| e.to_string()));
                }
                (None, Some(emoji), None) => {
                    let input = ReactionInput {
                        tenant: &tenant,
                        conversation_id: &conversation_id,
                        kind,
                        member_count,
                        sender: &sender,
                        message_id: s.message_id.unwrap_or(MessageId::from_u64(1)),
                        emoji: &emoji,
                    };
                    return Ok(host
                        .moderate_reaction(compiled, config, &input)
                        .map(|verdict| match verdict {
                            None => json!({
                                "verdict": "not_called",
                                "why": "a moderator of switchboard:plugin@0.1.0 sees no reactions"
                            }),
                            Some(Ok(())) => json!({ "verdict": "allow" }),
                            Some(Err(reason)) => json!({ "verdict": "reject", "reason": reason }),
                        })
                        .map_err(|e| e.to_string()));
                }
                _ => bail!(
                    "a moderation sample has one of `content` (a message), `emoji` (a reaction) or `preview` (a link preview's card)"
                ),
            };
            let options = SendOptions {
                reply_to: s.reply_to,
                thread_id: s.thread_id,
                mentions: s.mentions,
                mention_all: s.mention_all,
                custom: s.custom,
                previews: None,
            };
            let input = ModerationInput {
                tenant: &tenant,
                conversation_id: &conversation_id,
                kind,
                member_count,
                sender: &sender,
                content: &content,
                options: &options,
            };
            host.moderate(compiled, config, &input, &ContentLimits::default())
                .map(|verdict| match verdict {
                    None => {
                        json!({ "verdict": "not_called", "why": "plugins never see ciphertext" })
                    }
                    Some(Verdict::Allow) => json!({ "verdict": "allow" }),
                    Some(Verdict::Reject(reason)) => {
                        json!({ "verdict": "reject", "reason": reason })
                    }
                    Some(Verdict::Rewrite(content)) => {
                        json!({ "verdict": "rewrite", "content": content })
                    }
                })
                .map_err(|e| e.to_string())
        }
        Hook::EditPolicy => {
            let s: EditSample = sample(input, hook)?;
            let tenant = s.tenant.map_or_else(local, Ok)?;
            let actor = s.actor.map_or_else(alice, Ok)?;
            let now = s.now.unwrap_or_else(Timestamp::now);
            let message = Message {
                edited_at: s.edited_at,
                ..Message::plain(
                    MessageId::from_u64(1),
                    s.conversation_id.map_or_else(conversation, Ok)?,
                    s.seq.unwrap_or(1),
                    s.sender.unwrap_or_else(|| actor.clone()),
                    DeviceId::default_device(),
                    ClientMsgId::new("local")?,
                    Some(Content::Text {
                        text: "sample".into(),
                    }),
                    s.created_at.unwrap_or(now),
                )
            };
            let request = EditRequest {
                tenant: &tenant,
                action: match s.action {
                    SampleAction::Edit => EditAction::Edit,
                    SampleAction::Delete => EditAction::Delete,
                },
                actor: &actor,
                actor_is_admin: s.actor_is_admin,
                message: &message,
                now,
            };
            host.edit(compiled, config, &request)
                .map(|decision| match decision {
                    Ok(()) => json!({ "decision": "allow" }),
                    Err(reason) => json!({ "decision": "deny", "reason": reason }),
                })
                .map_err(|e| e.to_string())
        }
        Hook::FanOut => {
            let s: FanOutSample = sample(input, hook)?;
            let tenant = s.tenant.map_or_else(local, Ok)?;
            let kind = s.kind.unwrap_or(ConversationKind::Group);
            host.fan_out(compiled, config, &tenant, kind, s.member_count)
                .map(|mode| match mode {
                    FanOut::Write => json!({ "mode": "on_write" }),
                    FanOut::Read => json!({ "mode": "on_read" }),
                })
                .map_err(|e| e.to_string())
        }
    })
}
