//! The hash maps and sets of the proof, with rustc's Fx hasher instead of
//! SipHash: a module's derivation hashes short names and token positions
//! many times (SipHash was about a fifth of `AotModule::load`'s time,
//! `docs/launch-profile.md`). Their keys come from the module's own text;
//! a text made to collide slows its own load and changes no verdict.

/// A [`std::collections::HashMap`] with the Fx hasher.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// A [`std::collections::HashSet`] with the Fx hasher.
pub(crate) type HashSet<K> = std::collections::HashSet<K, rustc_hash::FxBuildHasher>;
