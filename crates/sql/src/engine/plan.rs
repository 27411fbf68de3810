//! Plans: what a statement does, in native operations (key reads, batches
//! of keys, index ranges, scans with pushed filters, batched writes).
//!
//! (Stub: filled in by the query work of issue 20.)
