//! ORDER BY over more rows than `sort_buffer_size` holds (MariaDB's
//! filesort with merge passes): the rows are shaped as they are read,
//! gathered until their bytes pass the session's `sort_buffer_size`, then
//! sorted (as in memory: [`sort_rows`]) and written to a temporary file as
//! one sorted *run*; at the end the runs are merged, at most
//! [`MERGE_FAN_IN`] at a time, and the last merge hands each row to the
//! sender as it comes. So the SQL node holds one buffer of rows and one
//! read buffer per run, not the result, and there is no row bound.
//!
//! The files are the operating system's unnamed temporary files in the
//! SQL node's temporary directory (`tmpdir`: `$TMPDIR`, else `/tmp`):
//! gone when the statement ends, or the process does. The order is the
//! in-memory sort's, ties included: each run is sorted stably, runs hold
//! rows in the order they came, and a merge takes the earliest run's row
//! of equal ones.

use std::cmp::Ordering;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{compare_shaped, sort_rows, Planned, Shaped};
use crate::engine::expr::{Dec, Val};
use crate::error::{codes, SqlError, SqlResult};
use crate::value::{Date, Time};

/// Runs merged into one at a time (MariaDB's `MERGEBUFF2` is 15): more
/// runs are merged in passes, groups of this many into one run each.
pub const MERGE_FAN_IN: usize = 16;
/// Bytes of each run's read and write buffer.
const RUN_BUFFER_BYTES: usize = 64 << 10;
/// The smallest sort buffer taken, whatever `sort_buffer_size` says: a
/// run of a handful of rows would only multiply files and passes.
pub const SORT_BUFFER_MIN_BYTES: usize = 32 << 10;

/// An ORDER BY's rows, sorted in memory while they fit in the sort
/// buffer and in runs on disk beyond it.
pub(in crate::engine::exec) struct FileSort<'p> {
    p: &'p Planned,
    key_items: &'p [Option<usize>],
    desc: Vec<bool>,
    buffer: Vec<Shaped>,
    /// What `buffer` holds, as [`row_bytes`] counts it.
    bytes: usize,
    buffer_max_bytes: usize,
    dir: PathBuf,
    runs: Vec<Run>,
    /// Merges of runs done (MariaDB's `Sort_merge_passes`).
    merge_passes: u64,
}

/// A sorted run in a temporary file.
struct Run {
    file: File,
    rows: u64,
}

/// Where a merge reads rows from: a run, or the last rows, sorted in
/// memory.
enum Source {
    Run { reader: BufReader<File>, left: u64 },
    Memory(std::vec::IntoIter<Shaped>),
}

impl Source {
    fn next(&mut self) -> SqlResult<Option<Shaped>> {
        match self {
            Source::Run { reader, left } => {
                if *left == 0 {
                    return Ok(None);
                }
                *left -= 1;
                read_row(reader).map(Some)
            }
            Source::Memory(rows) => Ok(rows.next()),
        }
    }
}

impl<'p> FileSort<'p> {
    /// A sort of `p`'s ORDER BY (`key_items` as [`super::shape`] makes
    /// them) holding at most `buffer_bytes` of rows in memory (at least
    /// [`SORT_BUFFER_MIN_BYTES`]), spilling to files in `dir`.
    pub fn new(
        p: &'p Planned,
        key_items: &'p [Option<usize>],
        buffer_bytes: usize,
        dir: &Path,
    ) -> FileSort<'p> {
        FileSort {
            p,
            key_items,
            desc: p.order.iter().map(|(_, d)| *d).collect(),
            buffer: Vec::new(),
            bytes: 0,
            buffer_max_bytes: buffer_bytes.max(SORT_BUFFER_MIN_BYTES),
            dir: dir.to_owned(),
            runs: Vec::new(),
            merge_passes: 0,
        }
    }

    /// Takes one row; a full buffer is sorted and written out as a run.
    pub fn push(&mut self, row: Shaped) -> SqlResult<()> {
        self.bytes += row_bytes(&row);
        self.buffer.push(row);
        if self.bytes > self.buffer_max_bytes {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> SqlResult<()> {
        sort_rows(self.p, self.key_items, &mut self.buffer);
        let rows = std::mem::take(&mut self.buffer);
        self.bytes = 0;
        let count = rows.len() as u64;
        let run = self.write_run(rows.into_iter().map(Ok), count)?;
        self.runs.push(run);
        Ok(())
    }

    fn write_run(
        &self,
        rows: impl Iterator<Item = SqlResult<Shaped>>,
        count: u64,
    ) -> SqlResult<Run> {
        let file = tempfile::tempfile_in(&self.dir).map_err(|e| self.io_error("create", &e))?;
        let mut out = BufWriter::with_capacity(RUN_BUFFER_BYTES, file);
        let mut scratch = Vec::new();
        for row in rows {
            scratch.clear();
            write_row(&row?, &mut scratch);
            out.write_all(&scratch)
                .map_err(|e| self.io_error("write", &e))?;
        }
        let mut file = out
            .into_inner()
            .map_err(|e| self.io_error("write", e.error()))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| self.io_error("rewind", &e))?;
        Ok(Run { file, rows: count })
    }

    fn io_error(&self, what: &str, e: &std::io::Error) -> SqlError {
        SqlError::new(
            codes::UNKNOWN,
            format!(
                "ORDER BY over more than sort_buffer_size ({} bytes): cannot {what} its sort \
                 file in {}: {e}",
                self.buffer_max_bytes,
                self.dir.display()
            ),
        )
    }

    /// Hands every row's values to `each`, in order, until it says stop
    /// (false); the merge passes it took (MariaDB's `Sort_merge_passes`:
    /// none when every row fit in the buffer).
    pub fn finish(mut self, mut each: impl FnMut(Vec<Val>) -> SqlResult<bool>) -> SqlResult<u64> {
        sort_rows(self.p, self.key_items, &mut self.buffer);
        let last = std::mem::take(&mut self.buffer);
        if self.runs.is_empty() {
            for (values, _) in last {
                if !each(values)? {
                    break;
                }
            }
            return Ok(0);
        }
        // Passes until one merge of at most MERGE_FAN_IN sources (the
        // runs and the rows in memory) is left.
        while self.runs.len() + 1 > MERGE_FAN_IN {
            let runs = std::mem::take(&mut self.runs);
            let mut groups = Vec::with_capacity(runs.len().div_ceil(MERGE_FAN_IN));
            let mut runs = runs.into_iter().peekable();
            while runs.peek().is_some() {
                groups.push(runs.by_ref().take(MERGE_FAN_IN).collect::<Vec<_>>());
            }
            for group in groups {
                if group.len() == 1 {
                    self.runs.extend(group);
                    continue;
                }
                let count = group.iter().map(|r| r.rows).sum();
                let mut merge = self.merge(group.into_iter().map(run_source).collect())?;
                let merged =
                    self.write_run(std::iter::from_fn(|| merge.next().transpose()), count)?;
                self.runs.push(merged);
                self.merge_passes += 1;
            }
        }
        let mut sources: Vec<Source> = std::mem::take(&mut self.runs)
            .into_iter()
            .map(run_source)
            .collect();
        sources.push(Source::Memory(last.into_iter()));
        self.merge_passes += 1;
        let mut merge = self.merge(sources)?;
        while let Some((values, _)) = merge.next()? {
            if !each(values)? {
                break;
            }
        }
        Ok(self.merge_passes)
    }

    fn merge(&self, sources: Vec<Source>) -> SqlResult<Merge<'_, 'p>> {
        let mut merge = Merge {
            sort: self,
            heads: Vec::with_capacity(sources.len()),
            sources,
            heap: Vec::new(),
        };
        for at in 0..merge.sources.len() {
            let head = merge.sources[at].next()?;
            merge.heads.push(head);
            if merge.heads[at].is_some() {
                merge.push(at);
            }
        }
        Ok(merge)
    }
}

fn run_source(run: Run) -> Source {
    Source::Run {
        reader: BufReader::with_capacity(RUN_BUFFER_BYTES, run.file),
        left: run.rows,
    }
}

/// A merge of sorted sources: a binary heap of the sources by their next
/// row (ties: the earlier source first, which keeps the sort stable).
struct Merge<'s, 'p> {
    sort: &'s FileSort<'p>,
    sources: Vec<Source>,
    heads: Vec<Option<Shaped>>,
    /// Source indices; the least head at 0.
    heap: Vec<usize>,
}

impl Merge<'_, '_> {
    fn less(&self, a: usize, b: usize) -> bool {
        let (Some(x), Some(y)) = (&self.heads[a], &self.heads[b]) else {
            unreachable!("only sources with a head are in the heap")
        };
        let s = self.sort;
        match compare_shaped(s.p, s.key_items, &s.desc, x, y) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => a < b,
        }
    }

    fn push(&mut self, source: usize) {
        self.heap.push(source);
        let mut at = self.heap.len() - 1;
        while at > 0 {
            let parent = (at - 1) / 2;
            if !self.less(self.heap[at], self.heap[parent]) {
                break;
            }
            self.heap.swap(at, parent);
            at = parent;
        }
    }

    fn sift_down(&mut self) {
        let mut at = 0;
        loop {
            let (l, r) = (2 * at + 1, 2 * at + 2);
            let mut least = at;
            if l < self.heap.len() && self.less(self.heap[l], self.heap[least]) {
                least = l;
            }
            if r < self.heap.len() && self.less(self.heap[r], self.heap[least]) {
                least = r;
            }
            if least == at {
                return;
            }
            self.heap.swap(at, least);
            at = least;
        }
    }

    /// The least row of every source's, and the source's next in its
    /// place.
    fn next(&mut self) -> SqlResult<Option<Shaped>> {
        let Some(&source) = self.heap.first() else {
            return Ok(None);
        };
        let next = self.sources[source].next()?;
        let row = std::mem::replace(&mut self.heads[source], next);
        if self.heads[source].is_none() {
            let last = self.heap.pop().expect("not empty");
            if !self.heap.is_empty() {
                self.heap[0] = last;
            }
        }
        self.sift_down();
        Ok(row)
    }
}

/// What a row takes in memory, about: its vectors and the bytes of its
/// strings.
fn row_bytes(row: &Shaped) -> usize {
    let strings: usize = row
        .0
        .iter()
        .chain(&row.1)
        .map(|v| match v {
            Val::Str(s) => s.capacity(),
            _ => 0,
        })
        .sum();
    std::mem::size_of::<Shaped>()
        + (row.0.len() + row.1.len()) * std::mem::size_of::<Val>()
        + strings
}

// ---- the run file's row format: the values, then the keys; each list a
// u32 count and that many values, each a tag byte and its bytes
// (little-endian) ----

const TAG_NULL: u8 = 0;
const TAG_INT: u8 = 1;
const TAG_UINT: u8 = 2;
const TAG_DEC: u8 = 3;
const TAG_DOUBLE: u8 = 4;
const TAG_STR: u8 = 5;
const TAG_DATE: u8 = 6;
const TAG_DATETIME: u8 = 7;
const TAG_TIME: u8 = 8;

fn write_row(row: &Shaped, out: &mut Vec<u8>) {
    for list in [&row.0, &row.1] {
        out.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for v in list {
            write_val(v, out);
        }
    }
}

fn write_date(d: &Date, out: &mut Vec<u8>) {
    out.extend_from_slice(&d.year.to_le_bytes());
    out.push(d.month);
    out.push(d.day);
}

fn write_val(v: &Val, out: &mut Vec<u8>) {
    match v {
        Val::Null => out.push(TAG_NULL),
        Val::Int(i) => {
            out.push(TAG_INT);
            out.extend_from_slice(&i.to_le_bytes());
        }
        Val::UInt(u) => {
            out.push(TAG_UINT);
            out.extend_from_slice(&u.to_le_bytes());
        }
        Val::Dec(d) => {
            out.push(TAG_DEC);
            out.extend_from_slice(&d.mantissa.to_le_bytes());
            out.push(d.scale);
        }
        Val::Double(f) => {
            out.push(TAG_DOUBLE);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Val::Str(s) => {
            out.push(TAG_STR);
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s);
        }
        Val::Date(d) => {
            out.push(TAG_DATE);
            write_date(d, out);
        }
        Val::DateTime(d, t) => {
            out.push(TAG_DATETIME);
            write_date(d, out);
            out.extend_from_slice(&[t.hour, t.minute, t.second]);
            out.extend_from_slice(&t.micros.to_le_bytes());
        }
        Val::Time(us) => {
            out.push(TAG_TIME);
            out.extend_from_slice(&us.to_le_bytes());
        }
    }
}

fn read_row(input: &mut impl Read) -> SqlResult<Shaped> {
    let values = read_list(input)?;
    let keys = read_list(input)?;
    Ok((values, keys))
}

fn corrupt(what: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        codes::UNKNOWN,
        format!("ORDER BY: reading back its sort file: {what}"),
    )
}

fn read_bytes<const N: usize>(input: &mut impl Read) -> SqlResult<[u8; N]> {
    let mut bytes = [0u8; N];
    input.read_exact(&mut bytes).map_err(corrupt)?;
    Ok(bytes)
}

fn read_list(input: &mut impl Read) -> SqlResult<Vec<Val>> {
    let count = u32::from_le_bytes(read_bytes(input)?) as usize;
    let mut list = Vec::with_capacity(count);
    for _ in 0..count {
        list.push(read_val(input)?);
    }
    Ok(list)
}

fn read_date(input: &mut impl Read) -> SqlResult<Date> {
    let [y0, y1, month, day] = read_bytes(input)?;
    Ok(Date {
        year: u16::from_le_bytes([y0, y1]),
        month,
        day,
    })
}

fn read_val(input: &mut impl Read) -> SqlResult<Val> {
    let [tag] = read_bytes(input)?;
    Ok(match tag {
        TAG_NULL => Val::Null,
        TAG_INT => Val::Int(i64::from_le_bytes(read_bytes(input)?)),
        TAG_UINT => Val::UInt(u64::from_le_bytes(read_bytes(input)?)),
        TAG_DEC => {
            let mantissa = crate::engine::expr::value::Mantissa::from_le_bytes(read_bytes(input)?);
            let [scale] = read_bytes(input)?;
            Val::Dec(Dec::new(mantissa, scale))
        }
        TAG_DOUBLE => Val::Double(f64::from_bits(u64::from_le_bytes(read_bytes(input)?))),
        TAG_STR => {
            let len = u32::from_le_bytes(read_bytes(input)?) as usize;
            let mut s = vec![0u8; len];
            input.read_exact(&mut s).map_err(corrupt)?;
            Val::Str(s)
        }
        TAG_DATE => Val::Date(read_date(input)?),
        TAG_DATETIME => {
            let date = read_date(input)?;
            let [hour, minute, second] = read_bytes(input)?;
            let micros = u32::from_le_bytes(read_bytes(input)?);
            Val::DateTime(
                date,
                Time {
                    hour,
                    minute,
                    second,
                    micros,
                },
            )
        }
        TAG_TIME => Val::Time(i64::from_le_bytes(read_bytes(input)?)),
        other => return Err(corrupt(format_args!("value tag {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_value_reads_back_as_written() {
        let row: Shaped = (
            vec![
                Val::Null,
                Val::Int(-7),
                Val::UInt(u64::MAX),
                Val::Dec(Dec::new(-123_456_789_012_345_678_901_234_567i128, 9)),
                Val::Double(-0.5),
                Val::Str(b"\x00caf\xc3\xa9".to_vec()),
                Val::Date(Date {
                    year: 2026,
                    month: 12,
                    day: 1,
                }),
            ],
            vec![
                Val::DateTime(
                    Date {
                        year: 1,
                        month: 2,
                        day: 3,
                    },
                    Time {
                        hour: 23,
                        minute: 59,
                        second: 58,
                        micros: 999_999,
                    },
                ),
                Val::Time(-86_400_000_001),
                Val::Str(Vec::new()),
            ],
        );
        let mut bytes = Vec::new();
        write_row(&row, &mut bytes);
        write_row(&row, &mut bytes);
        let mut input = bytes.as_slice();
        assert_eq!(read_row(&mut input).expect("first"), row);
        assert_eq!(read_row(&mut input).expect("second"), row);
        assert!(input.is_empty());
        // A cut file is an error naming it, not a panic.
        let mut cut = &bytes[..bytes.len() / 2 + 3];
        let _ = read_row(&mut cut).expect("the first row is whole");
        let error = read_row(&mut cut).expect_err("cut");
        assert!(error.to_string().contains("sort file"), "{error}");
    }
}
