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
const WIT: &str = include_str!("../../wit/0.4.0/plugin.wit");
const PLUGINS_MANIFEST: &str = include_str!("../../plugins/Cargo.toml");
const PLUGINS_LOCK: &str = include_str!("../../plugins/Cargo.lock");
const JS_PACKAGE: &str = include_str!("../../plugins/js/package.json");
const JS_LOCK: &str = include_str!("../../plugins/js/package-lock.json");
const JS_BUILD: &str = include_str!("../../plugins/js/build.mjs");
const JS_TYPES_SCRIPT: &str = include_str!("../../plugins/js/types.mjs");
const JS_CONFIG: &str = include_str!("../../plugins/js/jsconfig.json");
const JS_WORD_LIST: &str = include_str!("../../plugins/js/word-list.js");
/// The npm package name of `plugins/js`, which a project takes its own.
const JS_PACKAGE_NAME: &str = "\"name\": \"switchboard-js-plugins\"";

/// The TypeScript declarations of every hook's world (`plugins/js/types`,
/// which `node types.mjs --check` keeps equal to what jco makes of the
/// WIT), by path in the project.
const JS_TYPES: [(&str, &str); 11] = [
    (
        "types/moderator/moderator.d.ts",
        include_str!("../../plugins/js/types/moderator/moderator.d.ts"),
    ),
    (
        "types/moderator/interfaces/switchboard-plugin-host.d.ts",
        include_str!("../../plugins/js/types/moderator/interfaces/switchboard-plugin-host.d.ts"),
    ),
    (
        "types/moderator/interfaces/switchboard-plugin-moderation.d.ts",
        include_str!(
            "../../plugins/js/types/moderator/interfaces/switchboard-plugin-moderation.d.ts"
        ),
    ),
    (
        "types/moderator/interfaces/switchboard-plugin-types.d.ts",
        include_str!("../../plugins/js/types/moderator/interfaces/switchboard-plugin-types.d.ts"),
    ),
    (
        "types/edit-policy-plugin/edit-policy-plugin.d.ts",
        include_str!("../../plugins/js/types/edit-policy-plugin/edit-policy-plugin.d.ts"),
    ),
    (
        "types/edit-policy-plugin/interfaces/switchboard-plugin-edit-policy.d.ts",
        include_str!(
            "../../plugins/js/types/edit-policy-plugin/interfaces/switchboard-plugin-edit-policy.d.ts"
        ),
    ),
    (
        "types/edit-policy-plugin/interfaces/switchboard-plugin-host.d.ts",
        include_str!(
            "../../plugins/js/types/edit-policy-plugin/interfaces/switchboard-plugin-host.d.ts"
        ),
    ),
    (
        "types/fan-out-plugin/fan-out-plugin.d.ts",
        include_str!("../../plugins/js/types/fan-out-plugin/fan-out-plugin.d.ts"),
    ),
    (
        "types/fan-out-plugin/interfaces/switchboard-plugin-fan-out.d.ts",
        include_str!(
            "../../plugins/js/types/fan-out-plugin/interfaces/switchboard-plugin-fan-out.d.ts"
        ),
    ),
    (
        "types/fan-out-plugin/interfaces/switchboard-plugin-host.d.ts",
        include_str!(
            "../../plugins/js/types/fan-out-plugin/interfaces/switchboard-plugin-host.d.ts"
        ),
    ),
    (
        "types/fan-out-plugin/interfaces/switchboard-plugin-types.d.ts",
        include_str!(
            "../../plugins/js/types/fan-out-plugin/interfaces/switchboard-plugin-types.d.ts"
        ),
    ),
];

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
/// script, npm manifest and lockfile (what `npm ci` installs is what the
/// repository's plugins are built and tested with), the WIT package and
/// the TypeScript declarations of its worlds.
fn js_files(hook: Hook, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    if hook != Hook::Moderation {
        bail!(
            "the JavaScript template is a moderator; for the other hooks start from it and the types in plugins/README.md"
        );
    }
    let own_name = format!("\"name\": \"{name}\"");
    let package = JS_PACKAGE.replace(JS_PACKAGE_NAME, &own_name).replace(
        "\"build\": \"node build.mjs\"",
        "\"build\": \"node build.mjs moderator.js moderator dist/plugin.wasm\"",
    );
    let (_, _, sample) = hook_template(hook);
    let mut files = vec![
        ("package.json".to_owned(), package),
        (
            "package-lock.json".to_owned(),
            JS_LOCK.replace(JS_PACKAGE_NAME, &own_name),
        ),
        ("build.mjs".to_owned(), JS_BUILD.to_owned()),
        ("types.mjs".to_owned(), JS_TYPES_SCRIPT.to_owned()),
        (
            "jsconfig.json".to_owned(),
            JS_CONFIG.replace("\"word-list.js\"", "\"moderator.js\""),
        ),
        ("moderator.js".to_owned(), JS_WORD_LIST.to_owned()),
        ("wit/plugin.wit".to_owned(), WIT.to_owned()),
        ("sample.json".to_owned(), format!("{sample}\n")),
        ("README.md".to_owned(), js_readme(name)),
        (".gitignore".to_owned(), "/node_modules\n/dist\n".to_owned()),
    ];
    files.extend(
        JS_TYPES
            .iter()
            .map(|(path, text)| ((*path).to_owned(), (*text).to_owned())),
    );
    Ok(files)
}

fn js_readme(name: &str) -> String {
    format!(
        r#"# {name}

A Switchboard moderation plugin in JavaScript: `moderator.js`, built into a
component (with the StarlingMonkey engine) by ComponentizeJS.

```sh
npm ci                                   # once: the versions package-lock.json pins
npm run build                            # dist/plugin.wasm
switchboard plugin check dist/plugin.wasm
switchboard plugin call dist/plugin.wasm --hook moderation --input sample.json
npm run typecheck                        # moderator.js against the WIT's types
```

`types/` holds the TypeScript declarations of each hook's world, made
from `wit/plugin.wit` by jco (`npm run types`; `npm run check-types`
fails if they no longer match): editors show the message, the verdict
and the host imports from them, and `npm run typecheck` checks
`moderator.js` against them (the `@type` comment above `moderation`). For
another hook, export its interface (`editPolicy`, `fanOut`) and build
with its world (`edit-policy-plugin`, `fan-out-plugin`).

`switchboard plugin check` compiles the component once and keeps its
code in `~/.cache/switchboard/plugins`; later checks and calls of the
same build load it in milliseconds.

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
    fn the_javascript_template_carries_every_worlds_types_and_its_own_name() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../plugins/js/types");
        let mut on_disk = Vec::new();
        let mut walk = vec![std::path::PathBuf::from(dir)];
        while let Some(d) = walk.pop() {
            for entry in std::fs::read_dir(&d).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk.push(path);
                } else {
                    let relative = path.strip_prefix(dir).unwrap().display().to_string();
                    on_disk.push(format!("types/{relative}"));
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = JS_TYPES.iter().map(|(p, _)| (*p).to_owned()).collect();
        listed.sort();
        assert_eq!(
            listed, on_disk,
            "list every file of plugins/js/types in JS_TYPES"
        );
        let files = js_files(Hook::Moderation, "my-moderator").unwrap();
        let file = |name: &str| &files.iter().find(|(p, _)| p == name).unwrap().1;
        assert!(JS_LOCK.contains(JS_PACKAGE_NAME) && JS_PACKAGE.contains(JS_PACKAGE_NAME));
        for manifest in ["package.json", "package-lock.json"] {
            assert!(
                !file(manifest).contains("switchboard-js-plugins"),
                "{manifest}"
            );
            assert!(
                file(manifest).contains("\"name\": \"my-moderator\""),
                "{manifest}"
            );
        }
        assert!(file("jsconfig.json").contains("\"moderator.js\""));
    }

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
