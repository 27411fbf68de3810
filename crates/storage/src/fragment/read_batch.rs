//! Batched committed reads by primary key: the path the transaction
//! coordinator takes when it hands an LDM instance a batch of key reads
//! (DESIGN.md §4: batching is the main performance lever).
//!
//! Why a batch API: at millions of rows a lookup is two dependent cache
//! misses, the hash bucket and then the row (each with a TLB miss when the
//! pool is larger than the TLB reaches), and one at a time the CPU waits
//! for each in turn (~100–200 ns apiece). With the whole batch in hand the
//! misses of different keys overlap. Every key is encoded and hashed first;
//! then the batch goes through a pipeline in groups of
//! [`PREFETCH_GROUP_KEYS`] keys, three stages apart:
//!
//! 1. prefetch the hash buckets of the group two ahead;
//! 2. read the buckets of the group one ahead (arrived by now): each key's
//!    *candidate*, the first entry whose hash fragment matches, and
//!    prefetch every line of its row;
//! 3. compare each key of this group with its candidate row and copy the
//!    row out, from lines already in cache.
//!
//! Each stage is a tight loop over its group, so that the misses (and the
//! page walks) of several keys are in flight at once rather than one
//! between long stretches of other work. Only when the candidate is not the
//! key's row (another key with the same 32 hash bits) or there is none (no
//! such key, or its entry is in an overflow bucket, which stage 2 then
//! prefetches) does a key take the full lookup of [`Fragment::read`]; so
//! the results are exactly those of a loop of committed reads.
//!
//! Committed reads only: they take no lock and never wait, so a batch has
//! no per-key [`Outcome::Waiting`] to hand back. Locking reads, each with
//! its own operation id, go one by one through [`Fragment::read`].
//!
//! Memory: the results and the pipeline's scratch live in the caller's
//! [`ReadBatch`], reused from batch to batch; once its buffers have grown
//! to the largest batch seen, a batch allocates nothing.

use crate::memory::{prefetch_lines, PagePool};
use crate::schema::{distribution_hash, RowLayout, Value, ValueRef};
use crate::RowId;

use super::{Fragment, FragmentError, Outcome};

/// Most keys one [`Fragment::read_batch`] may be given: bounds the
/// batch's buffers (row images of up to 30,000 bytes) and the time the LDM
/// thread spends in one call.
pub const READ_BATCH_KEYS_MAX: usize = 4_096;

/// Keys per group of the batch pipeline: a group's rows are prefetched one
/// group ahead of their use, its buckets two groups ahead. Enough to keep
/// about as many misses in flight as a core can track (10–16 line fill
/// buffers, two page walks), few enough that prefetched lines are still in
/// L1 when used.
pub const PREFETCH_GROUP_KEYS: usize = 8;

/// `ReadBatch::candidates` of a key whose bucket had no entry with its hash
/// fragment (not a row id: the row store never hands it out).
const NO_CANDIDATE: u32 = u32::MAX;

/// The result of one key: where its image lies in the batch's buffers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct KeyResult {
    found: bool,
    fixed_at: u32,
    var_at: u32,
    var_len: u32,
}

/// The results of [`Fragment::read_batch`], key by key in the order the
/// keys were given: found or not, and the committed row image. Keep one
/// and reuse it: its buffers stay allocated between batches.
#[derive(Clone, Debug, Default)]
pub struct ReadBatch {
    results: Vec<KeyResult>,
    /// Fixed-size parts of the rows found, back to back.
    fixed: Vec<u8>,
    /// Bytes of each fixed-size part (the fragment's row layout).
    fixed_bytes: usize,
    /// Variable-size parts of the rows found, back to back.
    var: Vec<u8>,
    /// Pipeline scratch: the encoded keys back to back, where each ends,
    /// and their hashes.
    keys: Vec<u8>,
    key_ends: Vec<u32>,
    hashes: Vec<u64>,
    /// Pipeline scratch: each key's candidate row, or `NO_CANDIDATE`.
    candidates: Vec<u32>,
    /// Pipeline scratch: a candidate row's key, for keys that are not
    /// compared in place.
    candidate_key: Vec<u8>,
}

impl ReadBatch {
    pub fn new() -> ReadBatch {
        ReadBatch::default()
    }

    /// Keys of the last batch.
    pub fn len(&self) -> usize {
        self.results.len()
    }

    pub fn is_empty(&self) -> bool {
        self.results.is_empty()
    }

    /// Keys of the last batch that found a row.
    pub fn found(&self) -> usize {
        self.results.iter().filter(|r| r.found).count()
    }

    /// [`Outcome::Done`] when key `i` found a committed row,
    /// [`Outcome::NotFound`] otherwise (as [`Fragment::read`] says).
    pub fn outcome(&self, i: usize) -> Outcome {
        if self.results[i].found {
            Outcome::Done
        } else {
            Outcome::NotFound
        }
    }

    /// The row image of key `i`: fixed-size and variable-size part, or
    /// `None` when the key found no row.
    pub fn row(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let r = self.results[i];
        if !r.found {
            return None;
        }
        let fixed = r.fixed_at as usize;
        let var = r.var_at as usize;
        Some((
            &self.fixed[fixed..fixed + self.fixed_bytes],
            &self.var[var..var + r.var_len as usize],
        ))
    }

    /// Column `col` of key `i`'s row; `layout` is the fragment's.
    pub fn value<'a>(&'a self, layout: &RowLayout, i: usize, col: usize) -> Option<ValueRef<'a>> {
        self.row(i)
            .map(|(fixed, var)| layout.decode_column(fixed, var, col))
    }

    /// Forgets the results (keeps the buffers).
    pub fn clear(&mut self) {
        self.results.clear();
        self.fixed.clear();
        self.var.clear();
        self.keys.clear();
        self.key_ends.clear();
        self.hashes.clear();
        self.candidates.clear();
    }
}

impl Fragment {
    /// Committed reads of a batch of primary keys, with the cache misses of
    /// different keys overlapped (see the module documentation). `keys`
    /// holds the keys back to back, each the values of the key columns in
    /// key order, so `keys.len()` is a multiple of the key's column count;
    /// at most [`READ_BATCH_KEYS_MAX`] keys. `out` gets one result per key,
    /// in order, each exactly what [`Fragment::read`] with
    /// [`super::ReadMode::Committed`] would return.
    ///
    /// A key value that does not fit its column fails the whole batch
    /// before anything is read; `out` is then empty.
    pub fn read_batch(
        &self,
        pool: &PagePool,
        keys: &[Value],
        out: &mut ReadBatch,
    ) -> Result<(), FragmentError> {
        out.clear();
        out.fixed_bytes = self.layout.fixed_bytes();
        let columns = self.pk.column_count();
        assert!(
            columns > 0,
            "table {}: a primary key has columns",
            self.table
        );
        assert!(
            keys.len() <= READ_BATCH_KEYS_MAX * columns,
            "table {}: a read batch of {} values is more than {READ_BATCH_KEYS_MAX} keys of {columns} columns",
            self.table,
            keys.len()
        );
        if let Err(e) = self.encode_batch_keys(keys, out) {
            out.clear();
            return Err(e);
        }
        let n = out.hashes.len();
        out.candidates.resize(n, NO_CANDIDATE);
        out.results.reserve(n);
        // Group `k` is compared and copied (stage 3) one group after its
        // candidates were taken and their rows prefetched (stage 2), two
        // after its buckets were prefetched (stage 1).
        let groups = n.div_ceil(PREFETCH_GROUP_KEYS);
        let group =
            |k: usize| (k * PREFETCH_GROUP_KEYS).min(n)..((k + 1) * PREFETCH_GROUP_KEYS).min(n);
        for k in 0..groups.min(2) {
            self.prefetch_buckets(pool, &out.hashes[group(k)]);
        }
        for i in group(0) {
            self.take_candidate(pool, i, out);
        }
        for k in 0..groups {
            self.prefetch_buckets(pool, &out.hashes[group(k + 2)]);
            for i in group(k + 1) {
                self.take_candidate(pool, i, out);
            }
            for i in group(k) {
                self.read_one_committed(pool, i, out);
            }
        }
        debug_assert_eq!(out.results.len(), n);
        Ok(())
    }

    /// Encodes and hashes every key of a batch into `out`'s scratch.
    fn encode_batch_keys(&self, keys: &[Value], out: &mut ReadBatch) -> Result<(), FragmentError> {
        let columns = self.pk.column_count();
        for key in keys.chunks(columns) {
            let start = out.keys.len();
            self.pk.encode(key, &mut out.keys)?;
            out.hashes.push(distribution_hash(&out.keys[start..]));
            out.key_ends.push(out.keys.len() as u32);
        }
        debug_assert_eq!(out.hashes.len(), keys.len() / columns);
        Ok(())
    }

    #[inline]
    fn prefetch_buckets(&self, pool: &PagePool, hashes: &[u64]) {
        for &hash in hashes {
            self.hash.prefetch(pool, hash);
        }
    }

    /// Notes key `i`'s candidate row (its bucket should be in cache by
    /// now) and starts loading it.
    #[inline]
    fn take_candidate(&self, pool: &PagePool, i: usize, out: &mut ReadBatch) {
        if let Some(row) = self.hash.candidate(pool, out.hashes[i]) {
            debug_assert_ne!(row.0, NO_CANDIDATE);
            // The slot's first and last line (the header is in the first)
            // and every line of the fixed part between them: a row of
            // 100 bytes spans three lines more often than not.
            self.rows.prefetch(pool, row);
            prefetch_lines(self.rows.fixed(pool, row));
            out.candidates[i] = row.0;
        }
    }

    /// Looks up key `i` of the batch and appends its result.
    #[inline]
    fn read_one_committed(&self, pool: &PagePool, i: usize, out: &mut ReadBatch) {
        let ReadBatch {
            results,
            fixed,
            var,
            keys,
            key_ends,
            hashes,
            candidates,
            candidate_key,
            ..
        } = out;
        let start = if i == 0 { 0 } else { key_ends[i - 1] as usize };
        let key = &keys[start..key_ends[i] as usize];
        let lookup = self.lookup();
        let candidate = RowId(candidates[i]);
        let found = if candidates[i] != NO_CANDIDATE
            && lookup.row_has_key(pool, candidate, key, candidate_key)
        {
            Some(candidate)
        } else {
            lookup.find(pool, (key, hashes[i]), candidate_key)
        }
        // Reserved inserts are not committed rows (as in `read`).
        .filter(|&row| !self.rows.is_uncommitted(pool, row));
        let result = match found {
            None => KeyResult {
                found: false,
                fixed_at: fixed.len() as u32,
                var_at: var.len() as u32,
                var_len: 0,
            },
            Some(row) => {
                let row_fixed = self.rows.fixed(pool, row);
                let row_var = if self.rows.has_var_parts() {
                    self.rows.var(pool, row)
                } else {
                    &[]
                };
                let result = KeyResult {
                    found: true,
                    fixed_at: fixed.len() as u32,
                    var_at: var.len() as u32,
                    var_len: row_var.len() as u32,
                };
                fixed.extend_from_slice(row_fixed);
                var.extend_from_slice(row_var);
                result
            }
        };
        results.push(result);
    }
}
