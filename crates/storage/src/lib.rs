//! Storage of one local data manager (LDM) instance: where the data lives.
//!
//! Everything here is single-threaded by design: one LDM instance owns its
//! partitions and touches them from one thread, so no structure here has a
//! lock. Files are reached only through [`disk::Disk`], the determinism seam
//! for storage: the real implementation writes and fsyncs files, the
//! simulated one keeps them in memory and can fail, tear or lose unsynced
//! writes on command.
//!
//! The row format, keys and table definitions it stores are the `schema`
//! crate's, shared with the API nodes, which need them but not this crate.
//!
//! - [`memory`]: the page pool (the `DataMemory` budget) and the row store.
//! - [`hash_index`]: the primary-key index (linear hashing).
//! - [`ordered_index`]: ordered indexes over memcomparable keys.
//! - [`locks`]: row locks with FIFO wait queues and upgrade.
//! - [`disk`]: files, real and simulated.
//! - [`backup_file`]: the block files of an online backup.
//! - [`redo`]: the redo log part of one LDM instance.
//! - [`fragment`]: one partition of a table: rows, indexes, locks and uncommitted versions.
//! - [`checkpoint`]: local checkpoints of one fragment's rows, full and partial, and restore.
//! - [`instance`]: the storage of one LDM instance (the block that runs it
//!   is `datanode::ldm`): its fragments, redo log part and checkpoint
//!   rounds, and restart from disk.

pub mod backup_file;
pub mod checkpoint;
pub mod disk;
pub mod fragment;
pub mod hash_index;
pub mod instance;
pub mod locks;
pub mod memory;
pub mod ordered_index;
pub mod redo;

/// Where a row lives in its partition's row store. The row store decides the
/// bit layout (page number and slot); everyone else treats it as opaque.
/// Four bytes, so that a hash index entry stays small (`bytes_per_row`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowId(pub u32);

/// A global checkpoint id: every committed change belongs to one.
pub type Gci = u32;
