//! The real NATS CLI (`nats`, pinned, installed by
//! `scripts/install-nats-cli.sh` into `.tools/`), run the way an operator
//! types a command from our docs: as written, in a terminal (util-linux
//! `script` gives it one, since `nats stream view` pages only on a
//! terminal), with `NATS_URL` naming the server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// The CLI: `SWITCHBOARD_NATS_CLI`, else `.tools/nats`.
pub fn bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SWITCHBOARD_NATS_CLI") {
        return PathBuf::from(p);
    }
    let installed = crate::bins::workspace_root().join(".tools/nats");
    assert!(
        installed.is_file(),
        "the NATS CLI is not installed: run scripts/install-nats-cli.sh, or set SWITCHBOARD_NATS_CLI"
    );
    installed
}

/// What a command printed (stdout and stderr together, as a terminal
/// shows them) and whether it succeeded.
#[derive(Debug)]
pub struct Ran {
    pub line: String,
    pub ok: bool,
    pub text: String,
}

/// Fails the test unless `ran` succeeded and printed each of `shows`.
pub fn expect(ran: &Ran, shows: &[&str]) {
    assert!(ran.ok, "`{}` failed:\n{}", ran.line, ran.text);
    for s in shows {
        assert!(
            ran.text.contains(s),
            "`{}` does not show {s:?}:\n{}",
            ran.line,
            ran.text
        );
    }
}

/// Runs `line`, a documented command starting with `nats`, against
/// `server` (a `nats://` URL), with `env` added (credentials, say).
pub async fn run(server: &str, line: &str, env: &[(&str, &str)]) -> Ran {
    run_in_terminal(server, line, line, env, None).await
}

/// Runs `line` as [`run`] does, in the folder `dir`: for the lines that
/// write a file there (`> cmd.json`) or read one back.
pub async fn run_at(dir: &Path, server: &str, line: &str) -> Ran {
    run_in_terminal(server, line, line, &[], Some(dir)).await
}

/// Runs `line`, a command that goes on until stopped (`nats kv watch`),
/// for `seconds`, then stops it as Ctrl-C would; it succeeded if it was
/// still running then.
pub async fn run_for(server: &str, line: &str, seconds: u32) -> Ran {
    let shell = format!("timeout -s INT {seconds} {line}; test $? -eq 124");
    let mut ran = run_in_terminal(server, line, &shell, &[], None).await;
    ran.line = line.to_owned();
    ran
}

/// Runs `line`, a command that asks a yes/no question in the terminal
/// (`nats stream edit` of a KV bucket's stream asks even with `-f`), and
/// answers yes as an operator would. Its prompts ask the terminal where
/// the cursor is (`ESC [6n`); the answer says the first column.
pub async fn run_answering_yes(server: &str, line: &str) -> Ran {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut child = terminal(server, line)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running `{line}` under script(1): {e}"));
    let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        panic!("no pipes to script(1)");
    };
    let talk = async {
        let mut seen = Vec::new();
        let (mut queries, mut answered) = (0, false);
        let mut chunk = [0u8; 4096];
        loop {
            let n = stdout.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&seen).into_owned();
            while text.matches("\x1b[6n").count() > queries {
                queries += 1;
                let _ = stdin.write_all(b"\x1b[1;1R").await;
            }
            if !answered && text.contains("(y/N)") {
                answered = true;
                tokio::time::sleep(Duration::from_millis(200)).await;
                let _ = stdin.write_all(b"y\r").await;
            }
            let _ = stdin.flush().await;
        }
        seen
    };
    let seen = tokio::time::timeout(Duration::from_secs(30), talk)
        .await
        .unwrap_or_else(|_| panic!("`{line}` did not end within 30 s"));
    let status = child.wait().await.map(|s| s.success()).unwrap_or(false);
    Ran {
        line: line.to_owned(),
        ok: status,
        text: String::from_utf8_lossy(&seen).replace('\r', ""),
    }
}

/// `shell` run by bash in a terminal of its own (script(1)), the CLI
/// first on the `PATH` and `NATS_URL` naming `server`.
fn terminal(server: &str, shell: &str) -> Command {
    let cli = bin();
    let dir = cli.parent().map(PathBuf::from).unwrap_or_default();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("script");
    command
        .args(["-qec", shell, "/dev/null"])
        .env("PATH", path)
        .env("SHELL", "/bin/bash")
        .env("NATS_URL", server)
        // No context of the machine's user may change what runs.
        .env(
            "XDG_CONFIG_HOME",
            std::env::temp_dir().join("switchboard-nats-cli"),
        )
        .kill_on_drop(true);
    command
}

async fn run_in_terminal(
    server: &str,
    line: &str,
    shell: &str,
    env: &[(&str, &str)],
    dir: Option<&Path>,
) -> Ran {
    let mut command = terminal(server, shell);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .unwrap_or_else(|_| panic!("`{line}` did not end within 30 s"))
        .unwrap_or_else(|e| panic!("running `{line}` under script(1): {e}"));
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ran {
        line: line.to_owned(),
        ok: output.status.success(),
        text: text.replace('\r', ""),
    }
}

/// The `nats` command lines of the code blocks of one section of a
/// markdown file of the repository (from its heading to the next heading
/// of the same or a higher level), comments and trailing space removed.
pub fn documented(file: &str, heading: &str) -> Vec<String> {
    let path = crate::bins::workspace_root().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut inside = false;
    let mut in_block = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if !in_block && line.starts_with('#') {
            let this = line.chars().take_while(|c| *c == '#').count();
            if line.trim_end() == heading {
                inside = true;
                continue;
            }
            if inside && this <= level {
                break;
            }
        }
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if inside && in_block {
            let command = line.split(" # ").next().unwrap_or("").trim_end();
            if command.starts_with("nats ") {
                lines.push(command.to_owned());
            }
        }
    }
    assert!(
        !lines.is_empty(),
        "no `nats` command under {heading:?} in {file}"
    );
    lines
}
