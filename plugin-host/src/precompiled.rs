//! Precompiled components: the machine code wasmtime made of a component,
//! kept so that it is compiled once and loaded everywhere else (the
//! plugin CLI's cache directory, the `sb_plugin_compiled` object store).
//! Compiling a JavaScript engine takes tens of seconds; loading its code
//! takes milliseconds.
//!
//! An artifact is the code behind a header that says what it is:
//!
//! ```text
//! "SBPCODE1" | fingerprint (32) | component digest (71, "sha256:<hex>")
//!            | SHA-256 of the code (32) | code length (8, LE) | code
//! ```
//!
//! [`Precompiler::load`] gives wasmtime the code only when the header
//! names this engine's [`Fingerprint`] and the component expected, and
//! the code is whole (its SHA-256, computed here, matches). Anything else
//! is an [`ArtifactError`], and the caller compiles instead.
//!
//! **Trust.** Loading machine code runs whatever it holds, so artifacts
//! come only from [`Precompiler::seal`] of an engine of the same
//! fingerprint: written by this process, by the author's own CLI into
//! the author's own cache directory, or by a worker into
//! `sb_plugin_compiled`, which only workers and operators may write (the
//! secure NATS permissions). Tenants upload components, never artifacts.

use std::hash::Hasher;

use wasmtime::Engine;
use wasmtime::component::Component;

/// The wasmtime release the workspace pins (`=48.0.8` in the root
/// `Cargo.toml`; a unit test keeps the two equal). Part of every
/// fingerprint, and readable in artifact names.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// Changes when the artifact layout below changes.
const MAGIC: &[u8; 8] = b"SBPCODE1";
const DIGEST_TEXT_LEN: usize = "sha256:".len() + 64;
const HEADER_LEN: usize = MAGIC.len() + 32 + DIGEST_TEXT_LEN + 32 + 8;

/// What code an engine makes and can load: the wasmtime version and
/// everything of its configuration that changes the code it generates
/// (target, Cranelift flags, memory layout, features), as wasmtime's own
/// `precompile_compatibility_hash` reports it, through SHA-256 so that
/// every process computes the same value. Two engines with the same
/// fingerprint load each other's artifacts; a changed limit that shapes
/// code (`memory_bytes`, `stack_bytes`...) or another wasmtime changes it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    bytes: [u8; 32],
    /// `wt<version>-<hex of the first 16 bytes>`: short enough for an
    /// object or file name, with no `.` or `@` in it.
    text: String,
}

impl Fingerprint {
    pub fn of(engine: &Engine) -> Self {
        let mut hasher = Sha256Hasher(ring::digest::Context::new(&ring::digest::SHA256));
        hasher.write(MAGIC);
        hasher.write(WASMTIME_VERSION.as_bytes());
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
        let digest = hasher.0.finish();
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(digest.as_ref());
        let text = format!(
            "wt{}-{}",
            WASMTIME_VERSION.replace('.', "_"),
            hex(&bytes[..16])
        );
        Self { bytes, text }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fingerprint({})", self.text)
    }
}

/// Feeds whatever is hashed into SHA-256, so that a `Hash` value gives
/// the same digest in every process (std's hashers are seeded or may
/// change between Rust releases).
struct Sha256Hasher(ring::digest::Context);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finish();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest.as_ref()[..8]);
        u64::from_le_bytes(first)
    }
}

/// Why an artifact was not loaded. Never fatal: the caller compiles the
/// component instead.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("not a precompiled component of this format")]
    NotAnArtifact,
    #[error("made by another engine or configuration ({found}), not this one ({expected})")]
    OtherEngine { found: String, expected: String },
    #[error("made from another component")]
    OtherComponent,
    #[error("its code does not match its digest (damaged or cut short)")]
    Damaged,
    #[error("it holds {size} bytes, over max_precompiled_bytes ({max})")]
    TooLarge { size: usize, max: usize },
    /// wasmtime refused the code (its own version and flag checks).
    #[error("the engine refused it: {0}")]
    Refused(String),
}

/// Why a component's code could not be written out.
#[derive(Debug, thiserror::Error)]
#[error("writing out the compiled code: {0}")]
pub struct SealError(pub String);

/// Makes and loads artifacts for one engine.
#[derive(Clone)]
pub struct Precompiler {
    engine: Engine,
    fingerprint: Fingerprint,
}

impl Precompiler {
    pub fn new(engine: Engine) -> Self {
        Self {
            fingerprint: Fingerprint::of(&engine),
            engine,
        }
    }

    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The precompiler of an engine as the plugin host makes one for
    /// `limits` (the fuzz target of artifacts uses it).
    pub fn for_limits(limits: &crate::limits::PluginLimits) -> Result<Self, SealError> {
        crate::engine::engine(limits)
            .map(Self::new)
            .map_err(|e| SealError(format!("{e:#}")))
    }

    /// Compiles the component binary `wasm` and seals it: the artifact,
    /// and the component's digest it names.
    pub fn compile_and_seal(&self, wasm: &[u8]) -> Result<(Vec<u8>, String), SealError> {
        let component =
            Component::from_binary(&self.engine, wasm).map_err(|e| SealError(format!("{e:#}")))?;
        let digest = crate::compiled::digest(wasm);
        Ok((self.seal(&component, &digest)?, digest))
    }

    /// The artifact of `component` (compiled by this engine from the
    /// component whose digest is `digest`).
    pub fn seal(&self, component: &Component, digest: &str) -> Result<Vec<u8>, SealError> {
        if digest.len() != DIGEST_TEXT_LEN {
            return Err(SealError(format!("{digest:?} is not a component digest")));
        }
        let code = component
            .serialize()
            .map_err(|e| SealError(format!("{e:#}")))?;
        let mut artifact = Vec::with_capacity(HEADER_LEN + code.len());
        artifact.extend_from_slice(MAGIC);
        artifact.extend_from_slice(&self.fingerprint.bytes);
        artifact.extend_from_slice(digest.as_bytes());
        artifact.extend_from_slice(ring::digest::digest(&ring::digest::SHA256, &code).as_ref());
        artifact.extend_from_slice(&(code.len() as u64).to_le_bytes());
        artifact.extend_from_slice(&code);
        Ok(artifact)
    }

    /// The component `artifact` holds, if it is this engine's artifact of
    /// the component `digest`, whole, and at most `max` bytes.
    pub fn load(
        &self,
        artifact: &[u8],
        digest: &str,
        max: usize,
    ) -> Result<Component, ArtifactError> {
        let code = self.verify(artifact, digest, max)?;
        self.deserialize(code)
    }

    /// The code of `artifact` once every check of [`Self::load`] passed.
    fn verify<'a>(
        &self,
        artifact: &'a [u8],
        digest: &str,
        max: usize,
    ) -> Result<Verified<'a>, ArtifactError> {
        if artifact.len() > max {
            return Err(ArtifactError::TooLarge {
                size: artifact.len(),
                max,
            });
        }
        if artifact.len() < HEADER_LEN || &artifact[..MAGIC.len()] != MAGIC {
            return Err(ArtifactError::NotAnArtifact);
        }
        let (fingerprint, rest) = artifact[MAGIC.len()..].split_at(32);
        if fingerprint != self.fingerprint.bytes {
            return Err(ArtifactError::OtherEngine {
                found: hex(&fingerprint[..16]),
                expected: hex(&self.fingerprint.bytes[..16]),
            });
        }
        let (component, rest) = rest.split_at(DIGEST_TEXT_LEN);
        if component != digest.as_bytes() {
            return Err(ArtifactError::OtherComponent);
        }
        let (code_digest, rest) = rest.split_at(32);
        let (length, code) = rest.split_at(8);
        let mut le = [0u8; 8];
        le.copy_from_slice(length);
        if u64::from_le_bytes(le) != code.len() as u64
            || ring::digest::digest(&ring::digest::SHA256, code).as_ref() != code_digest
        {
            return Err(ArtifactError::Damaged);
        }
        Ok(Verified(code))
    }

    /// Hands verified code to wasmtime: the one place Switchboard loads
    /// machine code.
    #[allow(unsafe_code)]
    fn deserialize(&self, code: Verified<'_>) -> Result<Component, ArtifactError> {
        // SAFETY: `Component::deserialize` is unsafe because it maps the
        // bytes as executable code without checking what the code does.
        // These bytes are trusted because:
        // - they passed `verify` (the only way to make a `Verified`): the
        //   header names this engine's fingerprint, so an engine of the
        //   same wasmtime version and code-shaping configuration made
        //   them, and the component this caller expects, and their
        //   SHA-256, computed here, is the one `seal` wrote, so they are
        //   exactly the bytes `Component::serialize` returned, whole;
        // - only `seal` writes artifacts, and they are kept only where
        //   tenants cannot write: the CLI user's own cache directory, and
        //   `sb_plugin_compiled`, which gateways may only read and only
        //   workers and operators may write. A tenant's upload is a
        //   component (checked to start with `\0asm`), never an artifact.
        // wasmtime checks its own version and flags once more and refuses
        // a mismatch with an error.
        unsafe { Component::deserialize(&self.engine, code.0) }
            .map_err(|e| ArtifactError::Refused(format!("{e:#}")))
    }
}

/// Code that passed [`Precompiler::verify`]; nothing else makes one.
struct Verified<'a>(&'a [u8]);

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::limits::PluginLimits;

    fn engine(limits: &PluginLimits) -> Engine {
        crate::engine::engine(limits).unwrap()
    }

    /// The smallest component there is, `(component)`: no functions,
    /// but an engine still serializes and loads it like any other.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    fn component_bytes() -> Vec<u8> {
        EMPTY_COMPONENT.to_vec()
    }

    fn digest(bytes: &[u8]) -> String {
        crate::compiled::digest(bytes)
    }

    fn sealed(p: &Precompiler) -> (Vec<u8>, String) {
        let bytes = component_bytes();
        let component = Component::from_binary(&p.engine, &bytes).unwrap();
        let d = digest(&bytes);
        (p.seal(&component, &d).unwrap(), d)
    }

    #[test]
    fn the_fingerprint_is_the_same_for_the_same_configuration_and_changes_with_codegen() {
        let limits = PluginLimits::default();
        let a = Fingerprint::of(&engine(&limits));
        let b = Fingerprint::of(&engine(&limits));
        assert_eq!(a, b, "two engines of one configuration agree");
        assert!(a.as_str().starts_with("wt48_0_8-"), "{a}");
        assert_eq!(a.as_str().len(), "wt48_0_8-".len() + 32);
        assert!(!a.as_str().contains(['.', '@', '/']));
        // A limit that shapes the code (the memory reservation, bounds
        // checks) changes it...
        let bigger = PluginLimits {
            memory_bytes: limits.memory_bytes * 2,
            ..limits.clone()
        };
        assert_ne!(a, Fingerprint::of(&engine(&bigger)));
        // ...and so does another wasmtime configuration altogether.
        assert_ne!(a, Fingerprint::of(&Engine::default()));
        // One that only sizes the pool of instances does not.
        let pool = PluginLimits {
            pool_size: limits.pool_size + 1,
            ..limits
        };
        assert_eq!(a, Fingerprint::of(&engine(&pool)));
    }

    #[test]
    fn the_pinned_wasmtime_is_the_one_named_in_fingerprints() {
        let manifest = include_str!("../../Cargo.toml");
        let pin = format!("wasmtime = {{ version = \"={WASMTIME_VERSION}\"");
        assert!(
            manifest.contains(&pin),
            "update WASMTIME_VERSION to the workspace's wasmtime"
        );
    }

    #[test]
    fn an_artifact_loads_in_an_engine_of_the_same_fingerprint() {
        let limits = PluginLimits::default();
        let (artifact, d) = sealed(&Precompiler::new(engine(&limits)));
        // Another engine, same configuration: another process.
        let other = Precompiler::new(engine(&limits));
        assert!(other.load(&artifact, &d, artifact.len()).is_ok());
    }

    #[test]
    fn a_mismatched_damaged_or_oversized_artifact_is_refused_before_wasmtime_sees_it() {
        let limits = PluginLimits::default();
        let p = Precompiler::new(engine(&limits));
        let (artifact, d) = sealed(&p);
        let max = artifact.len();
        let refused = |bytes: &[u8], digest: &str, max: usize| p.load(bytes, digest, max).err();

        // At its size limit it loads; one byte under the limit it does not.
        assert!(p.load(&artifact, &d, max).is_ok());
        assert!(matches!(
            refused(&artifact, &d, max - 1),
            Some(ArtifactError::TooLarge { .. })
        ));
        // Another engine's configuration.
        let other = Precompiler::new(engine(&PluginLimits {
            memory_bytes: limits.memory_bytes * 2,
            ..limits
        }));
        assert!(matches!(
            other.load(&artifact, &d, max),
            Err(ArtifactError::OtherEngine { .. })
        ));
        // Another component's.
        let elsewhere = digest(b"another component");
        assert!(matches!(
            refused(&artifact, &elsewhere, max),
            Some(ArtifactError::OtherComponent)
        ));
        // A flipped bit in the code, and the code cut short.
        let mut flipped = artifact.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(
            refused(&flipped, &d, max),
            Some(ArtifactError::Damaged)
        ));
        let cut = &artifact[..artifact.len() - 1];
        assert!(matches!(
            refused(cut, &d, max),
            Some(ArtifactError::Damaged)
        ));
        // Not an artifact at all: a component, nothing, a header alone.
        assert!(matches!(
            refused(&component_bytes(), &d, max),
            Some(ArtifactError::NotAnArtifact)
        ));
        assert!(matches!(
            refused(&[], &d, max),
            Some(ArtifactError::NotAnArtifact)
        ));
        assert!(matches!(
            refused(&artifact[..HEADER_LEN - 1], &d, max),
            Some(ArtifactError::NotAnArtifact)
        ));
    }
}
