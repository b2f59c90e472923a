//! `switchboard tenant ...`: the operator's tenant administration (F21)
//! over NATS. Every change is a compare-and-set on the tenant's record in
//! `sb_tenants`, which every gateway and worker follows, so it applies
//! everywhere within moments and without a restart.

use anyhow::Context as _;
use clap::{Args, Subcommand};
use switchboard_nats::definitions::{BackboneConfig, TENANTS_BUCKET, tenants_bucket};
use switchboard_nats::records::tenants::{TenantRecord, TenantRegistry, fingerprint};
use switchboard_protocol::TenantId;

#[derive(Args)]
pub struct TenantArgs {
    /// The configuration file, for its `nats_url` and `[nats]` settings.
    #[arg(long, env = "SWITCHBOARD_CONFIG")]
    config: Option<std::path::PathBuf>,
    #[command(flatten)]
    nats: crate::config::NatsArgs,
    /// Replicas of the `sb_tenants` bucket if this command creates it
    /// (before any gateway or worker ran); an existing bucket is left as
    /// it is.
    #[arg(long, env = "SWITCHBOARD_REPLICAS", default_value_t = 1)]
    replicas: usize,
    /// Seconds the whole command may take, connecting included: an
    /// unreachable or silent NATS ends it with an error rather than a
    /// wait without end.
    #[arg(long, env = "SWITCHBOARD_CLI_TIMEOUT", default_value_t = 10)]
    timeout: u64,
    #[command(subcommand)]
    action: TenantAction,
}

#[derive(Subcommand)]
enum TenantAction {
    /// Create a tenant with its first keys.
    Create {
        id: String,
        /// An HS256 secret (at least 16 bytes); repeat for several.
        #[arg(long = "hs256-secret")]
        hs256_secrets: Vec<String>,
        /// An Ed25519 public key (32 bytes, base64); repeat for several.
        #[arg(long = "ed25519-key")]
        ed25519_keys: Vec<String>,
        /// The `iss` every token of the tenant must carry.
        #[arg(long)]
        issuer: Option<String>,
        /// What every token's `aud` must be or contain.
        #[arg(long)]
        audience: Option<String>,
        /// The identity provider's JSON Web Key Set (RS256, ES256, EdDSA).
        #[arg(long)]
        jwks_url: Option<String>,
    },
    /// List the tenants (secrets shown as fingerprints).
    List,
    /// Show one tenant (secrets shown as fingerprints).
    Show { id: String },
    /// Add a key: during a rotation the old and the new one are both valid.
    AddKey {
        id: String,
        #[arg(long = "hs256-secret")]
        hs256_secret: Option<String>,
        #[arg(long = "ed25519-key")]
        ed25519_key: Option<String>,
    },
    /// Remove a key (an HS256 secret by its value or fingerprint): tokens
    /// signed with it stop verifying.
    RemoveKey {
        id: String,
        #[arg(long = "hs256-secret")]
        hs256_secret: Option<String>,
        #[arg(long = "ed25519-key")]
        ed25519_key: Option<String>,
    },
    /// Set quotas, `name=value` (`none` removes one): max_connections_per_user,
    /// max_connections, messages_per_second_per_connection,
    /// messages_per_second, max_members_per_conversation, max_message_bytes.
    SetQuota {
        id: String,
        #[arg(required = true)]
        quotas: Vec<String>,
    },
    /// Set the tenant's push notifications from a JSON file (providers,
    /// preview, timing; see README), or turn them off with --off.
    SetPush {
        id: String,
        #[arg(long, required_unless_present = "off")]
        file: Option<std::path::PathBuf>,
        #[arg(long)]
        off: bool,
    },
    /// Require an `iss` or an `aud` in the tenant's tokens, or take its
    /// identity provider's key set (`--jwks-url`); an empty value stops
    /// it, a flag not given leaves it as it is.
    SetClaims {
        id: String,
        #[arg(long)]
        issuer: Option<String>,
        #[arg(long)]
        audience: Option<String>,
        #[arg(long)]
        jwks_url: Option<String>,
    },
    /// Set the tenant's default retention: messages of its conversations
    /// that set none of their own go after DAYS days (1 to 36500);
    /// `--off` keeps them.
    SetRetention {
        id: String,
        #[arg(required_unless_present = "off")]
        days: Option<u32>,
        #[arg(long, conflicts_with = "days")]
        off: bool,
    },
    /// Delete a tenant: its tokens stop verifying at once (its data stays).
    Delete { id: String },
}

fn tenant_id(raw: &str) -> anyhow::Result<TenantId> {
    TenantId::new(raw).with_context(|| format!("{raw:?} is not a tenant id"))
}

fn print(record: &TenantRecord) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(&record.redacted())?);
    Ok(())
}

/// Runs the command within its `--timeout`.
pub async fn run(args: TenantArgs) -> anyhow::Result<()> {
    let file = crate::secrets::load(args.config.as_deref())?;
    let nats = crate::config::nats_config(&args.nats, &file, "switchboard-tenant")?;
    let within = std::time::Duration::from_secs(args.timeout.max(1));
    let servers = nats.servers.join(",");
    let writes = !matches!(args.action, TenantAction::List | TenantAction::Show { .. });
    match tokio::time::timeout(within, act(args, nats)).await {
        Ok(done) => done,
        Err(_) if writes => anyhow::bail!(
            "no answer from NATS at {servers} within {}s (--timeout): the change may or may not \
             have been made; `switchboard tenant show` tells",
            within.as_secs()
        ),
        Err(_) => anyhow::bail!(
            "no answer from NATS at {servers} within {}s (--timeout): is it running, and \
             reachable from here?",
            within.as_secs()
        ),
    }
}

async fn act(args: TenantArgs, nats: switchboard_nats::NatsConfig) -> anyhow::Result<()> {
    let client = switchboard_nats::connect(&nats).await?;
    let js = async_nats::jetstream::new(client.clone());
    // Only this bucket, and only if missing: the streams and other buckets
    // are the processes' to define (with their replica settings).
    if js.get_key_value(TENANTS_BUCKET).await.is_err() {
        let config = BackboneConfig {
            replicas: args.replicas,
            ..BackboneConfig::default()
        };
        js.create_key_value(tenants_bucket(&config)?)
            .await
            .context("creating the sb_tenants bucket")?;
    }
    let registry = TenantRegistry::open(&js).await?;
    match args.action {
        TenantAction::Create {
            id,
            hs256_secrets,
            ed25519_keys,
            issuer,
            audience,
            jwks_url,
        } => {
            let mut record = TenantRecord::new(tenant_id(&id)?);
            record.hs256_secrets = hs256_secrets;
            record.ed25519_public_keys = ed25519_keys;
            record.issuer = issuer;
            record.audience = audience;
            record.jwks_url = jwks_url;
            print(&registry.create(record).await?)?;
        }
        TenantAction::List => {
            let all: Vec<_> = registry
                .list()
                .await?
                .iter()
                .map(TenantRecord::redacted)
                .collect();
            println!("{}", serde_json::to_string_pretty(&all)?);
        }
        TenantAction::Show { id } => print(&registry.get(&tenant_id(&id)?).await?)?,
        TenantAction::AddKey {
            id,
            hs256_secret,
            ed25519_key,
        } => {
            let record = registry
                .update(&tenant_id(&id)?, |r| {
                    r.hs256_secrets.extend(hs256_secret);
                    r.ed25519_public_keys.extend(ed25519_key);
                    Ok(())
                })
                .await?;
            print(&record)?;
        }
        TenantAction::RemoveKey {
            id,
            hs256_secret,
            ed25519_key,
        } => {
            let record = registry
                .update(&tenant_id(&id)?, |r| {
                    if let Some(s) = &hs256_secret {
                        r.hs256_secrets.retain(|k| k != s && fingerprint(k) != *s);
                    }
                    if let Some(k) = &ed25519_key {
                        r.ed25519_public_keys.retain(|e| e.trim() != k.trim());
                    }
                    Ok(())
                })
                .await?;
            print(&record)?;
        }
        TenantAction::SetQuota { id, quotas } => {
            let record = registry
                .update(&tenant_id(&id)?, |r| {
                    for q in &quotas {
                        let (name, value) = q.split_once('=').ok_or_else(|| {
                            switchboard_nats::records::tenants::TenantError::Invalid(format!(
                                "{q:?} is not name=value"
                            ))
                        })?;
                        r.quotas.set(name.trim(), value.trim())?;
                    }
                    Ok(())
                })
                .await?;
            print(&record)?;
        }
        TenantAction::SetPush { id, file, off } => {
            let push = match (&file, off) {
                (_, true) => None,
                (Some(path), false) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    Some(
                        serde_json::from_str(&text)
                            .with_context(|| format!("{} is not push settings", path.display()))?,
                    )
                }
                (None, false) => anyhow::bail!("give --file or --off"),
            };
            let record = registry
                .update(&tenant_id(&id)?, |r| {
                    r.push = push.clone();
                    Ok(())
                })
                .await?;
            print(&record)?;
        }
        TenantAction::SetClaims {
            id,
            issuer,
            audience,
            jwks_url,
        } => {
            let record = registry
                .update(&tenant_id(&id)?, |r| {
                    if let Some(issuer) = &issuer {
                        r.issuer = Some(issuer.clone()).filter(|i| !i.is_empty());
                    }
                    if let Some(audience) = &audience {
                        r.audience = Some(audience.clone()).filter(|a| !a.is_empty());
                    }
                    if let Some(url) = &jwks_url {
                        r.jwks_url = Some(url.clone()).filter(|u| !u.is_empty());
                    }
                    Ok(())
                })
                .await?;
            print(&record)?;
        }
        TenantAction::SetRetention { id, days, off } => {
            let days = if off { None } else { days };
            let record = registry
                .update(&tenant_id(&id)?, |r| {
                    r.retention_days = days;
                    Ok(())
                })
                .await?;
            print(&record)?;
        }
        TenantAction::Delete { id } => {
            registry.delete(&tenant_id(&id)?).await?;
            println!("tenant {id} deleted");
        }
    }
    client.flush().await.ok();
    Ok(())
}
