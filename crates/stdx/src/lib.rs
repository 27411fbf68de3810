//! Small things the standard library lacks, shared by crates that have no
//! other dependency in common (`storage` knows nothing of signals, `signal`
//! nothing of rows). TigerBeetle calls its equivalent `stdx`. Only what at
//! least two crates need belongs here; nothing here knows the database.
//!
//! - [`id_hash`]: the hasher of every map keyed by ids on the hot paths.
//! - [`rate_limit`]: a bound on how often a warning is logged.

pub mod id_hash;
pub mod key_hash;
pub mod rate_limit;

pub use id_hash::{IdHasher, IdMap, IdSet};
pub use key_hash::{KeyHasher, KeyMap, KeySet, KeyState};
pub use rate_limit::RateLimit;
