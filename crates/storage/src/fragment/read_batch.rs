//! Batched committed reads by primary key: the path the transaction
//! coordinator takes when it hands an LDM instance a batch of key reads
//! (DESIGN.md §4: batching is the main performance lever).
//!
//! Why a batch API: at millions of rows a lookup is two dependent cache
//! misses, the hash bucket and then the row, each with a TLB miss (the
//! pool is far larger than the TLB reaches, and under virtualisation a
//! page walk is itself a few dependent accesses), and one at a time the CPU
//! waits for each in turn (~200 ns apiece). With the whole batch in hand
//! the misses of different keys overlap. Every key is encoded and hashed
//! first (an integer key by the encoder's fast path); then the batch goes
//! through a pipeline in groups of [`PIPELINE_GROUP_KEYS`] keys, four steps
//! one group apart:
//!
//! 1. prefetch the primary hash buckets of group `k`;
//! 2. probe the buckets of group `k − 1` (arrived by now): each key's
//!    *candidate*, the first entry whose hash fragment matches, whose row
//!    lines it prefetches; or the overflow bucket where the chain goes on,
//!    which it prefetches; or the certainty that no row has the key;
//! 3. probe the overflow buckets pending in group `k − 2` the same way
//!    (about one lookup in six at 10M rows, where not-yet-split buckets
//!    hold twice the average, has its entry there);
//! 4. compare each key of group `k − 3` with its candidate row in place
//!    and copy the row out, from lines in cache by now.
//!
//! Each step is a tight loop over its group. What limits a lookup at
//! millions of rows is less the cache misses than the page walks of the
//! TLB misses: a prefetch whose address misses the TLB holds its place in
//! the reorder window until its walk is done, and the core has only two
//! walkers. Issued back to back, a group's prefetches queue their walks
//! together and the walkers stay busy while the other steps compute;
//! issued one per key between the other steps' work (a key's work is a
//! few hundred instructions, about the reorder window), at most one or two
//! walks would be in flight (measured: groups are ~6% faster than one key
//! per step per turn, group sizes 8 and 16 alike). Only when the candidate
//! is not the key's row (another key with the same 32 hash bits), or the
//! chain goes on past one overflow bucket, does a key take the full lookup
//! of [`Fragment::read`]; so the results are exactly those of a loop of
//! committed reads.
//!
//! Committed reads only: they take no lock and never wait, so a batch has
//! no per-key [`Outcome::Waiting`] to hand back. Locking reads, each with
//! its own operation id, go one by one through [`Fragment::read`].
//!
//! Memory: the results and the pipeline's scratch live in the caller's
//! [`ReadBatch`], reused from batch to batch; once its buffers have grown
//! to the largest batch seen, a batch allocates nothing.

use crate::hash_index::{OverflowBucket, Probe};
use crate::memory::PagePool;
use schema::{distribution_hash, KeyEncoder, RowLayout, Value, ValueRef};

use super::{Fragment, FragmentError, Outcome};

/// Most keys one [`Fragment::read_batch`] may be given: bounds the
/// batch's buffers (row images of up to 30,000 bytes) and the time the LDM
/// thread spends in one call.
pub const READ_BATCH_KEYS_MAX: usize = 4_096;

/// Keys per group of the batch pipeline: a group's buckets are prefetched
/// one group before they are probed, its rows one or two groups before
/// they are compared and copied. Enough that a miss (~200–300 ns with its
/// page walk, under load) has arrived when its step comes and that a
/// group's walks keep both page walkers busy; few enough that the
/// prefetched lines (three or four per key) are still in L1 and about as
/// many misses are in flight as a core can track (10–12 line fill
/// buffers).
const PIPELINE_GROUP_KEYS: usize = 8;

/// The result of one key. Its fixed-size part, when found, is slot `i`
/// of [`ReadBatch::fixed`]; its variable-size part lies at `var_at`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct KeyResult {
    found: bool,
    var_len: u32,
    var_at: u32,
}

impl KeyResult {
    const NOT_FOUND: KeyResult = KeyResult {
        found: false,
        var_len: 0,
        var_at: 0,
    };
}

/// Pipeline state of one key: its hash and what the hash index has said
/// of it so far.
#[derive(Copy, Clone, Debug)]
struct Pending {
    hash: u64,
    probe: Probe,
}

/// The results of [`Fragment::read_batch`], key by key in the order the
/// keys were given: found or not, and the committed row image. Keep one
/// and reuse it: its buffers stay allocated between batches.
#[derive(Clone, Debug, Default)]
pub struct ReadBatch {
    results: Vec<KeyResult>,
    /// Fixed-size parts of the rows, one slot of `fixed_bytes` per key in
    /// key order (what a key that found no row has there is stale). Never
    /// shrinks: a batch writes each row straight into its slot, without a
    /// length to keep up.
    fixed: Vec<u8>,
    /// Bytes of each fixed-size part (the fragment's row layout).
    fixed_bytes: usize,
    /// Variable-size parts of the rows found, back to back.
    var: Vec<u8>,
    /// Pipeline scratch: the encoded keys back to back; each
    /// `key_width` bytes when that is not zero (integer keys, at a fixed
    /// stride), else ending where `key_ends` says.
    keys: Vec<u8>,
    key_width: usize,
    key_ends: Vec<u32>,
    /// Pipeline scratch: each key's hash and probe.
    pending: Vec<Pending>,
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
    #[inline]
    pub fn row(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let r = self.results[i];
        if !r.found {
            return None;
        }
        let fixed = i * self.fixed_bytes;
        let var = r.var_at as usize;
        Some((
            &self.fixed[fixed..fixed + self.fixed_bytes],
            &self.var[var..var + r.var_len as usize],
        ))
    }

    /// Column `col` of key `i`'s row; `layout` is the fragment's.
    #[inline]
    pub fn value<'a>(&'a self, layout: &RowLayout, i: usize, col: usize) -> Option<ValueRef<'a>> {
        self.row(i)
            .map(|(fixed, var)| layout.decode_column(fixed, var, col))
    }

    /// Forgets the results (keeps the buffers).
    pub fn clear(&mut self) {
        self.results.clear();
        self.var.clear();
        self.keys.clear();
        self.key_width = 0;
        self.key_ends.clear();
        self.pending.clear();
    }
}

/// Key `i` of a batch's key scratch (see [`ReadBatch::keys`]).
#[inline(always)]
fn batch_key<'k>(keys: &'k [u8], width: usize, ends: &[u32], i: usize) -> &'k [u8] {
    if width != 0 {
        &keys[i * width..(i + 1) * width]
    } else {
        let start = if i == 0 { 0 } else { ends[i - 1] as usize };
        &keys[start..ends[i] as usize]
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
        let fixed_bytes = self.layout.fixed_bytes();
        out.fixed_bytes = fixed_bytes;
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
        let n = out.pending.len();
        out.results.resize(n, KeyResult::NOT_FOUND);
        if out.fixed.len() < n * fixed_bytes {
            out.fixed.resize(n * fixed_bytes, 0);
        }
        // Turn `k` takes step 1 for group `k`, step 2 for group `k − 1`,
        // step 3 for group `k − 2` and step 4 for group `k − 3` (module
        // doc), each a tight loop over its group.
        let g = PIPELINE_GROUP_KEYS;
        let groups = n.div_ceil(g);
        let group = |k: usize| (k * g).min(n)..((k + 1) * g).min(n);
        for k in 0..groups + 3 {
            for p in &out.pending[group(k)] {
                self.hash.prefetch(pool, p.hash);
            }
            if let Some(k) = k.checked_sub(1) {
                for p in &mut out.pending[group(k)] {
                    p.probe = self.probe_primary(pool, p.hash);
                }
            }
            if let Some(k) = k.checked_sub(2) {
                for p in &mut out.pending[group(k)] {
                    if let Probe::Overflow(overflow) = p.probe {
                        p.probe = self.probe_overflow(pool, p.hash, overflow);
                    }
                }
            }
            if let Some(k) = k.checked_sub(3) {
                for i in group(k) {
                    self.read_one_committed(pool, i, out);
                }
            }
        }
        Ok(())
    }

    /// Encodes and hashes every key of a batch into `out`'s scratch: at a
    /// fixed stride by the integer fast path when the key is all NOT NULL
    /// integers, else one by one through the general encoder (which also
    /// reports a key that does not fit).
    fn encode_batch_keys(&self, keys: &[Value], out: &mut ReadBatch) -> Result<(), FragmentError> {
        let columns = self.pk.column_count();
        let n = keys.len() / columns;
        if let Some(width) = self.pk.fixed_width() {
            if keys.len().is_multiple_of(columns) && self.encode_integer_keys(keys, width, out) {
                out.key_width = width;
                return Ok(());
            }
            out.keys.clear();
            out.pending.clear();
        }
        for key in keys.chunks(columns) {
            let start = out.keys.len();
            self.pk.encode(key, &mut out.keys)?;
            out.pending.push(Pending {
                hash: distribution_hash(&out.keys[start..]),
                probe: Probe::Absent,
            });
            out.key_ends.push(out.keys.len() as u32);
        }
        debug_assert_eq!(out.pending.len(), n);
        Ok(())
    }

    /// The integer fast path of [`Fragment::encode_batch_keys`]: every key
    /// `width` bytes, hashed by the short-key path of the distribution
    /// hash. False, with the scratch to be cleared, at the first key it
    /// does not take.
    fn encode_integer_keys(&self, keys: &[Value], width: usize, out: &mut ReadBatch) -> bool {
        let columns = self.pk.column_count();
        let n = keys.len() / columns;
        out.keys
            .resize(n * width + KeyEncoder::INTEGER_KEY_SLACK_BYTES, 0);
        out.pending.resize(
            n,
            Pending {
                hash: 0,
                probe: Probe::Absent,
            },
        );
        for ((key, p), at) in keys
            .chunks_exact(columns)
            .zip(&mut out.pending)
            .zip((0..).step_by(width))
        {
            if !self.pk.encode_integers_into(key, &mut out.keys[at..]) {
                return false;
            }
            p.hash = distribution_hash(&out.keys[at..at + width]);
        }
        true
    }

    /// Step 2: probes a key's primary bucket and starts loading what the
    /// key needs next, its candidate row or its overflow bucket.
    #[inline]
    pub(super) fn probe_primary(&self, pool: &PagePool, hash: u64) -> Probe {
        let probe = self.hash.probe(pool, hash);
        if let Probe::Row(row) = probe {
            self.rows.prefetch(pool, row);
        }
        probe
    }

    /// Step 3: the same for the overflow bucket step 2 found.
    #[inline]
    fn probe_overflow(&self, pool: &PagePool, hash: u64, overflow: OverflowBucket) -> Probe {
        let probe = self.hash.probe_overflow(pool, hash, overflow);
        if let Probe::Row(row) = probe {
            self.rows.prefetch(pool, row);
        }
        probe
    }

    /// Step 4: looks up key `i` of the batch and writes its result, the
    /// fixed-size part straight into its slot.
    #[inline]
    fn read_one_committed(&self, pool: &PagePool, i: usize, out: &mut ReadBatch) {
        let Pending { hash, probe } = out.pending[i];
        let key = batch_key(&out.keys, out.key_width, &out.key_ends, i);
        let lookup = self.lookup();
        // The candidate's slot, read in place (its lines are in cache by
        // now): the row when it is committed and holds the key. Otherwise,
        // unless the index said no row has the key, the full lookup.
        // Reserved inserts are not committed rows (as in `read`).
        let candidate_key = &mut out.candidate_key;
        let full_lookup = |candidate_key: &mut Vec<u8>| {
            let row = lookup.find(pool, (key, hash), candidate_key)?;
            Some((row, self.rows.fixed_if_committed(pool, row)?))
        };
        let found = match probe {
            Probe::Absent => None,
            Probe::Overflow(_) => full_lookup(candidate_key),
            Probe::Row(candidate) => match self.rows.fixed_if_committed(pool, candidate) {
                Some(row_fixed)
                    if lookup.fixed_has_key(pool, candidate, row_fixed, key, candidate_key) =>
                {
                    Some((candidate, row_fixed))
                }
                _ => full_lookup(candidate_key),
            },
        };
        let Some((row, row_fixed)) = found else {
            out.results[i] = KeyResult::NOT_FOUND;
            return;
        };
        let fixed_bytes = out.fixed_bytes;
        copy_row(
            &mut out.fixed[i * fixed_bytes..(i + 1) * fixed_bytes],
            row_fixed,
        );
        let mut result = KeyResult {
            found: true,
            var_len: 0,
            var_at: out.var.len() as u32,
        };
        if self.rows.has_var_parts() {
            let row_var = self.rows.var(pool, row);
            result.var_len = row_var.len() as u32;
            out.var.extend_from_slice(row_var);
        }
        out.results[i] = result;
    }
}

/// `dst.copy_from_slice(src)` for a row's fixed-size part, inline: 16-byte
/// moves and one overlapping move for the tail, instead of a call to
/// `memcpy` for a length it only learns at run time (a row of a partition
/// always has the same length, so the loop's branches are predicted).
#[inline(always)]
fn copy_row(dst: &mut [u8], src: &[u8]) {
    const CHUNK_BYTES: usize = 16;
    assert_eq!(dst.len(), src.len(), "a row image slot is the row's size");
    let len = src.len();
    if len < CHUNK_BYTES {
        dst.copy_from_slice(src);
        return;
    }
    for (d, s) in dst
        .chunks_exact_mut(CHUNK_BYTES)
        .zip(src.chunks_exact(CHUNK_BYTES))
    {
        d.copy_from_slice(s);
    }
    let tail = len - CHUNK_BYTES;
    dst[tail..].copy_from_slice(&src[tail..]);
}
