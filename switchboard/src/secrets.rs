//! Secrets from the environment. Each is settable as `NAME` (the value)
//! or `NAME_FILE` (a file holding it, as Kubernetes and Docker mount
//! secrets, so that the value stays out of the process's environment),
//! never both. An environment secret wins over the configuration file's.

use std::path::Path;

use anyhow::{Context as _, bail};

use crate::config::FileConfig;

/// Every secret `apply` takes from the environment, with the setting it
/// fills (docs/operations.md's configuration table lists the same).
pub const NATS_PASSWORD: &str = "SWITCHBOARD_NATS_PASSWORD";
pub const NATS_TOKEN: &str = "SWITCHBOARD_NATS_TOKEN";
/// Its `_FILE` is also the `--nats-nkey-seed-file` flag's variable.
pub const NATS_NKEY_SEED: &str = "SWITCHBOARD_NATS_NKEY_SEED";
pub const OPERATOR_TOKEN: &str = "SWITCHBOARD_OPERATOR_TOKEN";
pub const SCYLLA_PASSWORD: &str = "SWITCHBOARD_SCYLLA_PASSWORD";
pub const BLOB_URL_SECRET: &str = "SWITCHBOARD_BLOB_URL_SECRET";
pub const DEMO_SECRET: &str = "SWITCHBOARD_DEMO_SECRET";
/// Filled only where `[blobs.s3]` leaves them out (the AWS SDKs' names).
pub const S3_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
pub const S3_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";

/// The secret `name` names, from `name` or the file `name_FILE` names;
/// `None` when neither is set (an empty variable counts as unset).
pub fn from_env(name: &str) -> anyhow::Result<Option<String>> {
    let file_var = format!("{name}_FILE");
    let value = std::env::var(name).ok().filter(|v| !v.is_empty());
    let path = std::env::var_os(&file_var).filter(|p| !p.is_empty());
    match (value, path) {
        (Some(_), Some(_)) => bail!("both {name} and {file_var} are set: give one of them"),
        (Some(value), None) => Ok(Some(value)),
        (None, Some(path)) => read_file(&file_var, Path::new(&path)).map(Some),
        (None, None) => Ok(None),
    }
}

/// A secret file's contents without the one trailing line break editors
/// and `echo` add (anything else is part of the secret).
pub fn read_file(what: &str, path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{what}: reading {}", path.display()))?;
    let secret = match text.strip_suffix('\n') {
        Some(line) => line.strip_suffix('\r').unwrap_or(line),
        None => &text,
    };
    if secret.is_empty() {
        bail!("{what}: {} is empty", path.display());
    }
    Ok(secret.to_owned())
}

/// Puts the environment's secrets into `file`, where the rest of the
/// configuration reads them. One problem per variable that cannot be read.
pub fn apply(file: &mut FileConfig, problems: &mut Vec<String>) {
    let mut take = |name: &str| {
        from_env(name).unwrap_or_else(|e| {
            problems.push(format!("{e:#}"));
            None
        })
    };
    // Its `_FILE` form is the `--nats-nkey-seed-file` flag's variable,
    // read where that flag is (`config::nats_config`).
    let nkey_seed = std::env::var(NATS_NKEY_SEED).ok().filter(|v| !v.is_empty());
    if nkey_seed.is_some() {
        file.nats.get_or_insert_with(Default::default).nkey_seed = nkey_seed;
    }
    let password = take(NATS_PASSWORD);
    let token = take(NATS_TOKEN);
    if password.is_some() || token.is_some() {
        let nats = file.nats.get_or_insert_with(Default::default);
        nats.password = password.or(nats.password.take());
        nats.token = token.or(nats.token.take());
    }
    if let Some(token) = take(OPERATOR_TOKEN) {
        file.operator_token = Some(token);
    }
    if let Some(secret) = take(BLOB_URL_SECRET) {
        file.blob_url_secret = Some(secret);
    }
    if let Some(secret) = take(DEMO_SECRET) {
        file.demo_secret = Some(secret);
    }
    if let Some(password) = take(SCYLLA_PASSWORD) {
        file.scylla.get_or_insert_with(Default::default).password = Some(password);
    }
    let access_key = take(S3_ACCESS_KEY_ID);
    let secret_key = take(S3_SECRET_ACCESS_KEY);
    if let Some(s3) = file.blobs.as_mut().and_then(|b| b.s3.as_mut()) {
        if s3.access_key_id.is_empty() {
            s3.access_key_id = access_key.unwrap_or_default();
        }
        if s3.secret_access_key.is_empty() {
            s3.secret_access_key = secret_key.unwrap_or_default();
        }
    }
}

/// The configuration file with the environment's secrets, for commands
/// that need no more checks than their first connection makes.
pub fn load(path: Option<&Path>) -> anyhow::Result<FileConfig> {
    let mut file = FileConfig::load(path)?;
    let mut problems = Vec::new();
    apply(&mut file, &mut problems);
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_file_loses_one_trailing_line_break_only() {
        let dir = std::env::temp_dir().join(format!("sb-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            ("plain", "s3cret", "s3cret"),
            ("newline", "s3cret\n", "s3cret"),
            ("crlf", "s3cret\r\n", "s3cret"),
            ("inner", "two words \n\n", "two words \n"),
        ];
        for (name, contents, secret) in cases {
            let path = dir.join(name);
            std::fs::write(&path, contents).unwrap();
            assert_eq!(read_file("X_FILE", &path).unwrap(), secret, "{name}");
        }
        let empty = dir.join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let err = read_file("X_FILE", &empty).unwrap_err().to_string();
        assert!(err.contains("X_FILE") && err.contains("empty"), "{err}");
        let err = read_file("X_FILE", &dir.join("missing")).unwrap_err();
        assert!(format!("{err:#}").contains("missing"), "{err:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
