//! `switchboard plugin new HOOK DIR`: a plugin project that builds with
//! one command. It holds its own copy of the SDK (`switchboard-plugin/`,
//! with the WIT package), so it needs nothing from this repository; its
//! example is the repository's own example for the hook, which the test
//! command builds and runs.

use std::path::Path;

use anyhow::{Context as _, bail};
use switchboard_plugin_host::Hook;

const SDK_MANIFEST: &str = include_str!("../../plugins/sdk/Cargo.toml");
const SDK_SOURCE: &str = include_str!("../../plugins/sdk/src/lib.rs");
const WIT: &str = include_str!("../../wit/0.1.0/plugin.wit");
const PLUGINS_MANIFEST: &str = include_str!("../../plugins/Cargo.toml");
const PLUGINS_LOCK: &str = include_str!("../../plugins/Cargo.lock");
const JS_PACKAGE: &str = include_str!("../../plugins/js/package.json");
const JS_NPMRC: &str = include_str!("../../plugins/js/.npmrc");
const JS_BUILD: &str = include_str!("../../plugins/js/build.mjs");
const JS_WORD_LIST: &str = include_str!("../../plugins/js/word-list.js");

/// Per hook: the SDK feature, the example's source, and a sample input
/// for `switchboard plugin call`.
fn hook_template(hook: Hook) -> (&'static str, &'static str, &'static str) {
    match hook {
        Hook::Moderation => (
            "moderation",
            include_str!("../../plugins/no-shouting/src/lib.rs"),
            r#"{"content": {"kind": "text", "text": "PLEASE READ THIS NOW"}}"#,
        ),
        Hook::EditPolicy => (
            "edit-policy",
            include_str!("../../plugins/edit-window/src/lib.rs"),
            r#"{"action": "edit", "actor": "bob", "sender": "alice"}"#,
        ),
        Hook::FanOut => (
            "fan-out",
            include_str!("../../plugins/member-count/src/lib.rs"),
            r#"{"member_count": 500, "kind": "channel"}"#,
        ),
    }
}

/// The exact version of `name` the repository's plugins are built with.
fn locked_version(name: &str) -> Option<&'static str> {
    let at = PLUGINS_LOCK.find(&format!("name = \"{name}\"\nversion = \""))?;
    let rest = &PLUGINS_LOCK[at..];
    let start = rest.find("version = \"")? + "version = \"".len();
    let end = start + rest[start..].find('"')?;
    Some(&rest[start..end])
}

/// The SDK's manifest without the repository's workspace: versions and
/// the wit-bindgen dependency written out.
fn sdk_manifest() -> anyhow::Result<String> {
    let wit_bindgen = PLUGINS_MANIFEST
        .lines()
        .find(|l| l.starts_with("wit-bindgen = "))
        .context("plugins/Cargo.toml names no wit-bindgen")?;
    let wit_bindgen = match locked_version("wit-bindgen") {
        // The version the repository's plugins are tested with.
        Some(v) => wit_bindgen.replacen(
            &wit_bindgen[wit_bindgen.find("version = \"").unwrap_or(0)..]
                .split(',')
                .next()
                .unwrap_or_default()
                .to_owned(),
            &format!("version = \"={v}\""),
            1,
        ),
        None => wit_bindgen.to_owned(),
    };
    Ok(SDK_MANIFEST
        .replace("version.workspace = true", "version = \"0.1.0\"")
        .replace("edition.workspace = true", "edition = \"2024\"")
        .replace("license.workspace = true", "license = \"Apache-2.0\"")
        .replace("wit-bindgen.workspace = true", &wit_bindgen))
}

/// The language of a new plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Rust,
    /// JavaScript, built with ComponentizeJS (moderation only).
    Js,
}

/// Writes the project for `hook` in `language` into `dir` (which must not
/// exist, or be empty), named after the directory.
pub fn create(hook: Hook, language: Language, dir: &Path) -> anyhow::Result<String> {
    if dir.exists()
        && dir
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!("{} exists and is not empty", dir.display());
    }
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .context("name the directory with letters, digits, - and _ (it names the plugin)")?;
    let files = match language {
        Language::Rust => rust_files(hook, name)?,
        Language::Js => js_files(hook, name)?,
    };
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(name.to_owned())
}

/// A Rust project: the SDK, the WIT package, the example for the hook.
fn rust_files(hook: Hook, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    let (feature, example, sample) = hook_template(hook);
    Ok(vec![
        ("Cargo.toml".to_owned(), project_manifest(name, feature)),
        (
            ".cargo/config.toml".to_owned(),
            "[build]\ntarget = \"wasm32-wasip2\"\n".to_owned(),
        ),
        ("src/lib.rs".to_owned(), example.to_owned()),
        ("sample.json".to_owned(), format!("{sample}\n")),
        ("README.md".to_owned(), readme(name, hook)),
        ("switchboard-plugin/Cargo.toml".to_owned(), sdk_manifest()?),
        (
            "switchboard-plugin/src/lib.rs".to_owned(),
            SDK_SOURCE.to_owned(),
        ),
        (
            "switchboard-plugin/wit/plugin.wit".to_owned(),
            WIT.to_owned(),
        ),
        (".gitignore".to_owned(), "/target\n".to_owned()),
        // The dependency versions the repository's plugins are tested
        // with; cargo drops the entries this project does not use.
        ("Cargo.lock".to_owned(), PLUGINS_LOCK.to_owned()),
    ])
}

/// A JavaScript project: the repository's JavaScript word-list, its build
/// script and npm manifest, and the WIT package.
fn js_files(hook: Hook, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    if hook != Hook::Moderation {
        bail!(
            "the JavaScript template is a moderator; for the other hooks start from it and the types in plugins/README.md"
        );
    }
    let package = JS_PACKAGE
        .replace("\"switchboard-js-plugins\"", &format!("\"{name}\""))
        .replace(
            "\"build\": \"node build.mjs\"",
            "\"build\": \"node build.mjs moderator.js moderator dist/plugin.wasm\"",
        );
    let (_, _, sample) = hook_template(hook);
    Ok(vec![
        ("package.json".to_owned(), package),
        (".npmrc".to_owned(), JS_NPMRC.to_owned()),
        ("build.mjs".to_owned(), JS_BUILD.to_owned()),
        ("moderator.js".to_owned(), JS_WORD_LIST.to_owned()),
        ("wit/plugin.wit".to_owned(), WIT.to_owned()),
        ("sample.json".to_owned(), format!("{sample}\n")),
        ("README.md".to_owned(), js_readme(name)),
        (".gitignore".to_owned(), "/node_modules\n/dist\n".to_owned()),
    ])
}

fn js_readme(name: &str) -> String {
    format!(
        r#"# {name}

A Switchboard moderation plugin in JavaScript: `moderator.js`, built into a
component (with the StarlingMonkey engine) by ComponentizeJS.

```sh
npm install                              # once
npm run build                            # dist/plugin.wasm
switchboard plugin check dist/plugin.wasm
switchboard plugin call dist/plugin.wasm --hook moderation --input sample.json
```

Then deploy it as a shadow beside the active version, watch how often it
agrees, promote it, and roll back if need be, as `plugins/README.md` in
the Switchboard repository shows (its "JavaScript" section maps the WIT
types to JavaScript values).
"#
    )
}

fn project_manifest(name: &str, feature: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
switchboard-plugin = {{ path = "switchboard-plugin", features = ["{feature}"] }}

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = true

# A project of its own, wherever it is put.
[workspace]
"#
    )
}

fn readme(name: &str, hook: Hook) -> String {
    let wasm = name.replace('-', "_");
    let h = hook.as_str();
    format!(
        r#"# {name}

A Switchboard {h} plugin. `src/lib.rs` is the plugin; `switchboard-plugin/`
is the SDK (types, helpers, the `{h}` macro) with the WIT package it is
built against.

```sh
rustup target add wasm32-wasip2          # once
cargo build --release                    # target/wasm32-wasip2/release/{wasm}.wasm
switchboard plugin check target/wasm32-wasip2/release/{wasm}.wasm
switchboard plugin call target/wasm32-wasip2/release/{wasm}.wasm --hook {h} --input sample.json
```

Then deploy it as a shadow beside the active version, watch how often it
agrees, promote it, and roll back if need be (an admin token of the
tenant in `$TOKEN`):

```sh
P=https://chat.example.com/v1/admin/plugins/{h}
curl -X PUT -H "authorization: Bearer $TOKEN" -H 'content-type: application/wasm' \
     --data-binary @target/wasm32-wasip2/release/{wasm}.wasm "$P/shadow"
curl -H "authorization: Bearer $TOKEN" "$P/shadow"
curl -X POST -H "authorization: Bearer $TOKEN" "$P/shadow/promote"
curl -X POST -H "authorization: Bearer $TOKEN" "$P/rollback"
```

The plugin author's guide is `plugins/README.md` in the Switchboard
repository.
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdk_manifest_stands_alone_with_the_tested_wit_bindgen() {
        let manifest = sdk_manifest().unwrap();
        assert!(!manifest.contains(".workspace"), "{manifest}");
        let version = locked_version("wit-bindgen").unwrap();
        assert!(
            manifest.contains(&format!("wit-bindgen = {{ version = \"={version}\"")),
            "{manifest}"
        );
    }
}
