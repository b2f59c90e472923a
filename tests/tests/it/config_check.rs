//! `switchboard config check`: a role's configuration checked as its
//! start checks it, without connecting (issue 32: the Kubernetes example
//! crash-looped on "a NATS password was given without a user"), and
//! secrets given as `NAME` or `NAME_FILE`.

use std::path::Path;
use std::process::{Command, Output};

use switchboard_tests::switchboard_bin;

/// Runs the binary with only `env` (and PATH) in its environment.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(switchboard_bin());
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn config_file(dir: &Path) -> String {
    let path = dir.join("switchboard.toml");
    std::fs::write(
        &path,
        "partitions = 8\n[nats]\nuser = \"gateway\"\ndefine_backbone = false\n\
         [[tenants]]\nid = \"acme\"\nhs256_secrets = [\"0123456789abcdef0123\"]\n",
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn a_good_configuration_passes_with_a_password_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(dir.path());
    let password = dir.path().join("nats-password");
    std::fs::write(&password, "gateway-password\n").unwrap();
    let password = password.display().to_string();
    let out = run(
        &["config", "check", "--role", "gateway", "--config", &config],
        &[("SWITCHBOARD_NATS_PASSWORD_FILE", &password)],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("ok: gateway configuration"), "{said}");
    assert!(said.contains("user \"gateway\""), "{said}");
    assert!(said.contains("define_backbone false"), "{said}");
    // Without the file, the user has no password.
    let out = run(
        &["config", "check", "--role", "gateway", "--config", &config],
        &[],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("needs a password"), "{}", text(&out));
    // An empty secret file is refused, naming the variable.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let out = run(
        &["config", "check", "--role", "gateway", "--config", &config],
        &[(
            "SWITCHBOARD_NATS_PASSWORD_FILE",
            &empty.display().to_string(),
        )],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("SWITCHBOARD_NATS_PASSWORD_FILE"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_password_without_a_user_fails_the_check_and_the_start() {
    let env = [("SWITCHBOARD_NATS_PASSWORD", "worker-password")];
    let out = run(&["config", "check", "--role", "worker"], &env);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("problem: a NATS password was given without a user"),
        "{}",
        text(&out)
    );
    // The worker's start runs the same checks: it stops before connecting
    // (nothing listens on the default NATS port's stand-in here).
    let out = run(&["worker", "--nats-url", "nats://127.0.0.1:1"], &env);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("a NATS password was given without a user"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_value_and_its_file_together_fail_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("operator-token");
    std::fs::write(&token, "operator-token-0123456789\n").unwrap();
    let out = run(
        &["config", "check", "--role", "gateway"],
        &[
            ("SWITCHBOARD_DEMO_SECRET", "0123456789abcdef0123"),
            ("SWITCHBOARD_OPERATOR_TOKEN", "operator-token-0123456789"),
            (
                "SWITCHBOARD_OPERATOR_TOKEN_FILE",
                &token.display().to_string(),
            ),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(
            "both SWITCHBOARD_OPERATOR_TOKEN and SWITCHBOARD_OPERATOR_TOKEN_FILE are set"
        ),
        "{said}"
    );
    // The file alone is read, trailing newline dropped: a short one is
    // refused by length, a long one passes.
    let short = dir.path().join("short");
    std::fs::write(&short, "short\n").unwrap();
    let out = run(
        &["config", "check", "--role", "gateway"],
        &[
            ("SWITCHBOARD_DEMO_SECRET", "0123456789abcdef0123"),
            (
                "SWITCHBOARD_OPERATOR_TOKEN_FILE",
                &short.display().to_string(),
            ),
        ],
    );
    assert!(
        text(&out).contains("operator_token must be at least 16 bytes"),
        "{}",
        text(&out)
    );
    let out = run(
        &["config", "check", "--role", "gateway"],
        &[
            ("SWITCHBOARD_DEMO_SECRET", "0123456789abcdef0123"),
            (
                "SWITCHBOARD_OPERATOR_TOKEN_FILE",
                &token.display().to_string(),
            ),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
}
