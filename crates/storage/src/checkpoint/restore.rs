//! Restoring a fragment's rows from its newest complete LCP chain.
//!
//! The chain is read newest first: the first record of a page met is the
//! newest, so each page's rows are inserted once, and older records of it
//! are checked and skipped. Pages missing from the newest LCP's page list
//! held no rows when it ended and stay empty. Every byte read is checked
//! (record CRCs, then the whole file's CRC and length against the control
//! file) before restore returns.

use std::path::{Path, PathBuf};

use crate::disk::{Disk, DiskFile, OpenMode};
use crate::memory::{row_id, PagePool, RowStore, FIXED_PAGES_MAX, VAR_PART_BYTES_MAX};
use crate::redo::Lsn;
use crate::Gci;

use super::format::{
    le_u16, le_u32, Control, DataHeader, RecordHeader, RowLayout, Trailer, DATA_HEADER_BYTES,
    RECORD_CRC_BYTES, RECORD_HEADER_BYTES, ROW_HEADER_BYTES, TAG_PAGE, TAG_PAGE_LIST, TAG_TRAILER,
    TRAILER_BODY_BYTES,
};
use super::{
    chain, corrupt, data_path, io_error, list_files, newest_complete, CheckpointError,
    CheckpointKind, CompletedLcp, READ_CHUNK_BYTES,
};

/// What [`restore`] put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredCheckpoint {
    /// The LCP restored (the newest complete one).
    pub lcp_id: u64,
    pub kind: CheckpointKind,
    /// The chain read, newest first; its last member is the full LCP.
    pub chain: Vec<u64>,
    /// Replay the redo log from here (the LCP's start): the rows are as
    /// they were at some time after it, and the redo records since make
    /// them exact. The caller must check that its redo log still reaches
    /// back this far.
    pub redo_start: Lsn,
    /// The newest GCI the fragment could hold when the LCP started.
    pub max_gci: Gci,
    pub table_version: u32,
    /// Rows inserted into the row store.
    pub rows: u64,
    /// What the next LCP of this fragment builds on (its generation is the
    /// filled row store's).
    pub completed: CompletedLcp,
}

/// Fills `rows`, which must be empty, from the newest complete LCP of a
/// fragment in `dir`, every row at its old [`crate::RowId`]. `Ok(None)`
/// when the fragment has no complete LCP. On an error the row store holds
/// part of the rows: release it. The caller rebuilds the indexes from
/// `rows.rows()` and replays the redo from
/// [`RestoredCheckpoint::redo_start`].
pub fn restore(
    disk: &dyn Disk,
    dir: &Path,
    table_id: u32,
    fragment_id: u32,
    pool: &mut PagePool,
    rows: &mut RowStore,
) -> Result<Option<RestoredCheckpoint>, CheckpointError> {
    assert!(
        rows.row_count() == 0 && rows.page_count() == 0,
        "restore into a row store that holds rows"
    );
    let files = list_files(disk, dir, table_id, fragment_id)?;
    let Some(newest) = newest_complete(disk, dir, table_id, fragment_id, &files)? else {
        return Ok(None);
    };
    let members = chain(disk, dir, newest)?;
    let newest_path = data_path(dir, table_id, fragment_id, newest.lcp_id);
    check_layout(&newest_path, newest.layout, rows)?;
    let mut pages = PageSet::default();
    read_page_list(disk, &newest_path, &newest, &mut pages)?;
    let mut restored_rows = 0u64;
    let mut reader = Reader::default();
    for control in &members {
        let path = data_path(dir, table_id, fragment_id, control.lcp_id);
        let target = Target {
            pool: &mut *pool,
            rows: &mut *rows,
            pages: &mut pages,
            table_id,
            fragment_id,
        };
        restored_rows += reader.read_file(disk, &path, control, target)?;
    }
    debug_assert_eq!(rows.row_count(), restored_rows);
    let generation = rows.mark_checkpoint();
    let completed = CompletedLcp {
        lcp_id: newest.lcp_id,
        kind: newest.kind,
        full_lcp_id: newest.full_lcp_id,
        lcps_in_chain: u32::from(newest.lcps_in_chain),
        table_version: newest.table_version,
        redo_start: newest.redo_start,
        max_gci: newest.max_gci,
        generation,
        fixed_bytes: newest.layout.fixed_bytes,
        with_var: newest.layout.with_var,
        data_bytes: newest.data_bytes,
        pages_written: 0,
        rows_written: 0,
    };
    Ok(Some(RestoredCheckpoint {
        lcp_id: newest.lcp_id,
        kind: newest.kind,
        chain: members.iter().map(|c| c.lcp_id).collect(),
        redo_start: newest.redo_start,
        max_gci: newest.max_gci,
        table_version: newest.table_version,
        rows: restored_rows,
        completed,
    }))
}

fn check_layout(path: &Path, layout: RowLayout, rows: &RowStore) -> Result<(), CheckpointError> {
    let describe = |fixed: u32, with_var: bool, slots: u32| {
        let var = if with_var { "with" } else { "without" };
        format!("{fixed} fixed bytes {var} variable-size parts, {slots} per page")
    };
    let expected = describe(
        rows.fixed_bytes() as u32,
        rows.has_var_parts(),
        rows.slots_per_page(),
    );
    let found = describe(layout.fixed_bytes, layout.with_var, layout.slots_per_page);
    if found != expected {
        return Err(CheckpointError::LayoutMismatch {
            file: path.to_path_buf(),
            found,
            expected,
        });
    }
    Ok(())
}

/// Pages of the final page list, and which of them a record has filled.
#[derive(Default)]
struct PageSet {
    listed: Vec<u64>,
    filled: Vec<u64>,
}

impl PageSet {
    fn add(&mut self, page: u32) {
        let word = page as usize / 64;
        if word >= self.listed.len() {
            self.listed.resize(word + 1, 0);
            self.filled.resize(word + 1, 0);
        }
        self.listed[word] |= 1 << (page % 64);
    }

    /// Whether a record of `page` should be applied: the page is listed and
    /// no newer record filled it. Marks it filled.
    fn take(&mut self, page: u32) -> bool {
        let (word, bit) = (page as usize / 64, 1u64 << (page % 64));
        let listed = self.listed.get(word).is_some_and(|w| w & bit != 0);
        if !listed || self.filled[word] & bit != 0 {
            return false;
        }
        self.filled[word] |= bit;
        true
    }
}

/// Reads the newest LCP's page list (it says which pages exist).
fn read_page_list(
    disk: &dyn Disk,
    path: &Path,
    control: &Control,
    pages: &mut PageSet,
) -> Result<(), CheckpointError> {
    let file = open_data(disk, path, control)?;
    let offset = control.page_list_offset;
    let mut header = [0u8; RECORD_HEADER_BYTES];
    let fits = offset >= DATA_HEADER_BYTES as u64
        && offset + RECORD_HEADER_BYTES as u64 <= control.data_bytes;
    if !fits {
        return Err(corrupt(path, offset, "the page list lies outside the file"));
    }
    read_exact(&*file, path, offset, &mut header)?;
    let h = RecordHeader::decode(&header);
    if h.tag != TAG_PAGE_LIST || u64::from(h.body_bytes) != 4 * u64::from(h.a) {
        return Err(corrupt(
            path,
            offset,
            "no page list where the control file says",
        ));
    }
    if offset + h.record_bytes() > control.data_bytes {
        return Err(corrupt(
            path,
            offset,
            "the page list runs past the end of the file",
        ));
    }
    let mut record = vec![0u8; h.record_bytes() as usize];
    read_exact(&*file, path, offset, &mut record)?;
    check_crc(path, offset, &record)?;
    let body = &record[RECORD_HEADER_BYTES..record.len() - RECORD_CRC_BYTES];
    let mut last = None;
    for at in (0..body.len()).step_by(4) {
        let page = le_u32(body, at);
        if page >= FIXED_PAGES_MAX || last.is_some_and(|l| l >= page) {
            let reason = format!("page list entry {page} out of order or range");
            return Err(corrupt(path, offset, reason));
        }
        pages.add(page);
        last = Some(page);
    }
    Ok(())
}

fn open_data(
    disk: &dyn Disk,
    path: &Path,
    control: &Control,
) -> Result<Box<dyn DiskFile>, CheckpointError> {
    let file = match disk.open(path, OpenMode::ReadOnly) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let reason = "missing, though its control file says the LCP is complete";
            return Err(corrupt(path, 0, reason));
        }
        Err(e) => return Err(io_error("open", path, 0, e)),
    };
    let len = file.len().map_err(|e| io_error("size of", path, 0, e))?;
    if len != control.data_bytes {
        let reason = format!(
            "the file is {len} bytes, its control file says {}{}",
            control.data_bytes,
            if len < control.data_bytes {
                " (truncated)"
            } else {
                ""
            }
        );
        return Err(corrupt(path, len.min(control.data_bytes), reason));
    }
    Ok(file)
}

fn read_exact(
    file: &dyn DiskFile,
    path: &Path,
    offset: u64,
    buf: &mut [u8],
) -> Result<(), CheckpointError> {
    let read = file
        .read_full_at(offset, buf)
        .map_err(|e| io_error("read", path, offset, e))?;
    if read < buf.len() {
        return Err(corrupt(
            path,
            offset + read as u64,
            "the file ends inside a record",
        ));
    }
    Ok(())
}

fn check_crc(path: &Path, offset: u64, record: &[u8]) -> Result<(), CheckpointError> {
    let (covered, crc) = record.split_at(record.len() - RECORD_CRC_BYTES);
    if crc32c::crc32c(covered) != le_u32(crc, 0) {
        let tag = covered[0];
        return Err(corrupt(
            path,
            offset,
            format!("checksum mismatch in a record (tag {tag})"),
        ));
    }
    Ok(())
}

/// Where the rows of a file go.
struct Target<'a> {
    pool: &'a mut PagePool,
    rows: &'a mut RowStore,
    pages: &'a mut PageSet,
    table_id: u32,
    fragment_id: u32,
}

/// Reads a data file front to back through one reused buffer.
#[derive(Default)]
struct Reader {
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_offset: u64,
}

/// What a data file held, counted while reading it, to check its trailer.
#[derive(Default)]
struct Tally {
    last_page: Option<u32>,
    page_records: u32,
    rows: u64,
    inserted: u64,
    /// Offset and page count of the page list, once read.
    page_list: Option<(u64, u32)>,
}

impl Tally {
    fn check_trailer(
        &self,
        path: &Path,
        offset: u64,
        body: &[u8],
        control: &Control,
    ) -> Result<(), CheckpointError> {
        if body.len() != TRAILER_BODY_BYTES {
            return Err(corrupt(path, offset, "trailer of the wrong size"));
        }
        let trailer = Trailer::decode(body);
        let (list_offset, list_pages) = self.page_list.expect("the trailer follows the page list");
        let expected = Trailer {
            page_records: self.page_records,
            pages_in_list: list_pages,
            rows: self.rows,
            page_list_offset: list_offset,
        };
        if trailer != expected || list_offset != control.page_list_offset {
            let reason = format!("trailer says {trailer:?}, the file holds {expected:?}");
            return Err(corrupt(path, offset, reason));
        }
        Ok(())
    }
}

impl Reader {
    /// Reads, checks and applies one data file of the chain; returns the
    /// rows it inserted.
    fn read_file(
        &mut self,
        disk: &dyn Disk,
        path: &Path,
        control: &Control,
        mut target: Target<'_>,
    ) -> Result<u64, CheckpointError> {
        let file = open_data(disk, path, control)?;
        let mut crc = self.read_header(&*file, path, control)?;
        let mut tally = Tally::default();
        let mut offset = DATA_HEADER_BYTES as u64;
        loop {
            let record = self.record(&*file, path, offset, control.data_bytes)?;
            check_crc(path, offset, record)?;
            crc = crc32c::crc32c_append(crc, record);
            let h = RecordHeader::decode(record);
            let body = &record[RECORD_HEADER_BYTES..record.len() - RECORD_CRC_BYTES];
            let next = offset + h.record_bytes();
            match h.tag {
                TAG_PAGE if tally.page_list.is_none() => {
                    let page = h.a;
                    if page >= FIXED_PAGES_MAX || tally.last_page.is_some_and(|l| l >= page) {
                        let reason = format!("page record for page {page} out of order or range");
                        return Err(corrupt(path, offset, reason));
                    }
                    tally.last_page = Some(page);
                    let apply = target.pages.take(page);
                    let layout = control.layout;
                    tally.inserted +=
                        apply_page(path, offset, &h, body, layout, apply, &mut target)?;
                    tally.page_records += 1;
                    tally.rows += u64::from(h.c);
                }
                TAG_PAGE_LIST if tally.page_list.is_none() => {
                    if u64::from(h.body_bytes) != 4 * u64::from(h.a) {
                        return Err(corrupt(path, offset, "page list length mismatch"));
                    }
                    tally.page_list = Some((offset, h.a));
                }
                TAG_TRAILER if tally.page_list.is_some() => {
                    tally.check_trailer(path, offset, body, control)?;
                    if next != control.data_bytes {
                        return Err(corrupt(path, next, "bytes after the trailer"));
                    }
                    break;
                }
                tag => {
                    let reason = format!("unexpected record (tag {tag})");
                    return Err(corrupt(path, offset, reason));
                }
            }
            offset = next;
        }
        if crc != control.data_crc {
            let reason = "the file's checksum differs from its control file's";
            return Err(corrupt(path, 0, reason));
        }
        Ok(tally.inserted)
    }

    /// Reads and checks the data file header; returns the CRC of its bytes
    /// (the start of the whole file's CRC).
    fn read_header(
        &mut self,
        file: &dyn DiskFile,
        path: &Path,
        control: &Control,
    ) -> Result<u32, CheckpointError> {
        self.buf.clear();
        self.buf_offset = 0;
        let len = DATA_HEADER_BYTES as u64;
        let bytes = self.fill(file, path, 0, len, control.data_bytes)?;
        let bytes: &[u8; DATA_HEADER_BYTES] = bytes.try_into().expect("fill gives what was asked");
        let header = DataHeader::decode(bytes).map_err(|why| corrupt(path, 0, why))?;
        let matches = header.table_id == control.table_id
            && header.table_version == control.table_version
            && header.fragment_id == control.fragment_id
            && header.lcp_id == control.lcp_id
            && header.full_lcp_id == control.full_lcp_id
            && header.kind == control.kind
            && header.layout == control.layout;
        if !matches {
            let reason = format!("header {header:?} does not match its control file {control:?}");
            return Err(corrupt(path, 0, reason));
        }
        Ok(crc32c::crc32c(bytes))
    }

    /// The whole record at `offset` (header, body, CRC), bounds-checked
    /// against the file length.
    fn record(
        &mut self,
        file: &dyn DiskFile,
        path: &Path,
        offset: u64,
        file_bytes: u64,
    ) -> Result<&[u8], CheckpointError> {
        if offset + (RECORD_HEADER_BYTES + RECORD_CRC_BYTES) as u64 > file_bytes {
            return Err(corrupt(path, offset, "the file ends before its trailer"));
        }
        let header = self.fill(file, path, offset, RECORD_HEADER_BYTES as u64, file_bytes)?;
        let h = RecordHeader::decode(header);
        if offset + h.record_bytes() > file_bytes {
            let reason = format!(
                "a record of {} bytes runs past the end of the file",
                h.record_bytes()
            );
            return Err(corrupt(path, offset, reason));
        }
        self.fill(file, path, offset, h.record_bytes(), file_bytes)
    }

    /// `len` bytes at `offset` of the file, from the buffer, refilled in
    /// chunks of `READ_CHUNK_BYTES` as reading moves forward.
    fn fill(
        &mut self,
        file: &dyn DiskFile,
        path: &Path,
        offset: u64,
        len: u64,
        file_bytes: u64,
    ) -> Result<&[u8], CheckpointError> {
        debug_assert!(offset >= self.buf_offset && offset + len <= file_bytes);
        let end = offset + len;
        if end > self.buf_offset + self.buf.len() as u64 {
            // Keep from `offset` on, read up to a chunk (or the record) more.
            let keep_from = (offset - self.buf_offset) as usize;
            self.buf.drain(..keep_from.min(self.buf.len()));
            self.buf_offset = offset;
            let have = self.buf.len() as u64;
            let want = len.max(READ_CHUNK_BYTES as u64).min(file_bytes - offset);
            let start = self.buf.len();
            self.buf.resize(want as usize, 0);
            read_exact(file, path, offset + have, &mut self.buf[start..])?;
        }
        let at = (offset - self.buf_offset) as usize;
        Ok(&self.buf[at..at + len as usize])
    }
}

/// Checks a page record's rows and, when `apply`, inserts them. Returns the
/// rows inserted.
fn apply_page(
    path: &Path,
    offset: u64,
    h: &RecordHeader,
    body: &[u8],
    layout: RowLayout,
    apply: bool,
    target: &mut Target<'_>,
) -> Result<u64, CheckpointError> {
    let fixed_bytes = layout.fixed_bytes as usize;
    let page = h.a;
    let mut at = 0usize;
    let mut last_slot: Option<u16> = None;
    for _ in 0..h.c {
        let bad = |reason: &str| corrupt(path, offset, format!("page {page}: {reason}"));
        if at + ROW_HEADER_BYTES + fixed_bytes > body.len() {
            return Err(bad("rows run past the record"));
        }
        let slot = le_u16(body, at);
        let var_len = le_u16(body, at + 2) as usize;
        let in_order = last_slot.is_none_or(|l| l < slot);
        if u32::from(slot) >= layout.slots_per_page || !in_order {
            return Err(bad("slot out of order or range"));
        }
        if var_len > VAR_PART_BYTES_MAX || (!layout.with_var && var_len > 0) {
            return Err(bad("variable-size part too large or not allowed"));
        }
        let fixed_at = at + ROW_HEADER_BYTES;
        let var_at = fixed_at + fixed_bytes;
        if var_at + var_len > body.len() {
            return Err(bad("rows run past the record"));
        }
        if apply {
            let row = row_id(page, u32::from(slot));
            let (fixed, var) = (&body[fixed_at..var_at], &body[var_at..var_at + var_len]);
            target
                .rows
                .insert_at(target.pool, row, fixed, var)
                .map_err(|source| CheckpointError::Memory {
                    table_id: target.table_id,
                    fragment_id: target.fragment_id,
                    file: PathBuf::from(path),
                    source,
                })?;
        }
        last_slot = Some(slot);
        at = var_at + var_len;
    }
    if at != body.len() {
        return Err(corrupt(
            path,
            offset,
            format!("page {page}: bytes after the last row"),
        ));
    }
    Ok(if apply { u64::from(h.c) } else { 0 })
}
