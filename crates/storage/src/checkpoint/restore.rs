//! Restoring a fragment's rows from its newest complete LCP chain.
//!
//! What restore builds is the chain applied oldest first: for each page
//! record, empty the slots its bitmap says are not live and upsert the rows
//! it holds; a live row absent from a record keeps its image from earlier
//! in the chain. It gets there reading the chain *newest* first, which
//! inserts every row once: the first record of a page met is the page's
//! newest, and its bitmap says which slots are live in the end; each of
//! those slots takes its row from the newest record that holds one, and
//! older images of it are checked and skipped. A live slot that no record
//! holds a row for is damage. Pages missing from the newest LCP's page
//! list held no rows when it ended and stay empty. Every byte read is
//! checked (record CRCs, then the whole file's CRC and length against the
//! control file) before restore returns.

use std::path::{Path, PathBuf};

use crate::disk::{Disk, DiskFile, OpenMode};
use crate::memory::{row_id, PagePool, RowStore, FIXED_PAGES_MAX, VAR_PART_BYTES_MAX};
use crate::redo::Lsn;
use crate::Gci;

use super::format::{
    bitmap_bytes, le_u16, le_u32, Control, DataHeader, RecordHeader, RowLayout, Trailer,
    DATA_HEADER_BYTES, RECORD_CRC_BYTES, RECORD_HEADER_BYTES, ROW_HEADER_BYTES, TAG_PAGE,
    TAG_PAGE_LIST, TAG_TRAILER, TRAILER_BODY_BYTES,
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
    let mut pages = PageSet::new(newest.layout.slots_per_page);
    read_page_list(disk, &newest_path, &newest, &mut pages)?;
    let mut restored_rows = 0u64;
    let mut reader = Reader::default();
    for (member, control) in members.iter().enumerate() {
        let path = data_path(dir, table_id, fragment_id, control.lcp_id);
        let target = Target {
            pool: &mut *pool,
            rows: &mut *rows,
            pages: &mut pages,
            member,
            table_id,
            fragment_id,
        };
        restored_rows += reader.read_file(disk, &path, control, target)?;
    }
    if let Some((page, slot, member, offset)) = pages.first_missing() {
        let path = data_path(dir, table_id, fragment_id, members[member].lcp_id);
        let reason =
            format!("page {page}: slot {slot} is live, but no LCP of the chain holds its row");
        return Err(corrupt(&path, offset, reason));
    }
    assert_eq!(rows.row_count(), restored_rows);
    // Every row restored is in the chain: none is marked changed, so the
    // next partial LCP writes only what changes from now on.
    assert_eq!(rows.changed_rows(), 0, "restored rows are marked changed");
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

/// What restore knows of each page while it reads the chain newest first.
struct PageSet {
    words_per_page: usize,
    /// Bit per page: the newest LCP's page list names it.
    listed: Vec<u64>,
    /// Bit per page: its newest record has been read.
    decided: Vec<u64>,
    /// `words_per_page` words per page: the slots live in the page's newest
    /// record whose row no record read so far held.
    missing: Vec<u64>,
    /// Per page: chain member (index, newest first) and file offset of its
    /// newest record, to name it if a row stays missing.
    newest: Vec<(usize, u64)>,
}

impl PageSet {
    fn new(slots_per_page: u32) -> PageSet {
        PageSet {
            words_per_page: slots_per_page.div_ceil(64) as usize,
            listed: Vec::new(),
            decided: Vec::new(),
            missing: Vec::new(),
            newest: Vec::new(),
        }
    }

    /// Adds a page of the page list (ascending).
    fn add(&mut self, page: u32) {
        let word = page as usize / 64;
        if word >= self.listed.len() {
            self.listed.resize(word + 1, 0);
            self.decided.resize(word + 1, 0);
        }
        self.listed[word] |= 1 << (page % 64);
        let pages = page as usize + 1;
        if pages > self.newest.len() {
            self.newest.resize(pages, (0, 0));
            self.missing.resize(pages * self.words_per_page, 0);
        }
    }

    fn is_listed(&self, page: u32) -> bool {
        let (word, bit) = (page as usize / 64, 1u64 << (page % 64));
        self.listed.get(word).is_some_and(|w| w & bit != 0)
    }

    /// Records a listed page's record; the first one met is its newest:
    /// its live slots are the page's, all missing yet.
    fn record(&mut self, page: u32, bitmap: &[u8], member: usize, offset: u64) {
        debug_assert!(self.is_listed(page));
        let (word, bit) = (page as usize / 64, 1u64 << (page % 64));
        if self.decided[word] & bit != 0 {
            return;
        }
        self.decided[word] |= bit;
        self.newest[page as usize] = (member, offset);
        let start = page as usize * self.words_per_page;
        let words = &mut self.missing[start..start + self.words_per_page];
        for (w, chunk) in words.iter_mut().zip(bitmap.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
    }

    /// Whether slot `slot` of a listed page still waits for its row;
    /// takes it if so.
    fn take(&mut self, page: u32, slot: u32) -> bool {
        let at = page as usize * self.words_per_page + slot as usize / 64;
        let bit = 1u64 << (slot % 64);
        let missing = self.missing[at] & bit != 0;
        self.missing[at] &= !bit;
        missing
    }

    /// A slot live in its page's newest record that no record held a row
    /// for: page, slot, and where that newest record is.
    fn first_missing(&self) -> Option<(u32, u32, usize, u64)> {
        let at = self.missing.iter().position(|&w| w != 0)?;
        let page = at / self.words_per_page;
        let slot = (at % self.words_per_page) * 64 + self.missing[at].trailing_zeros() as usize;
        let (member, offset) = self.newest[page];
        Some((page as u32, slot as u32, member, offset))
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
    /// The file's place in the chain, newest first.
    member: usize,
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
                    tally.inserted += apply_page(path, offset, &h, body, control, &mut target)?;
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

/// Checks a page record (its bitmap, and its rows against it) and inserts
/// the rows of live slots that no newer record held. Returns the rows
/// inserted.
fn apply_page(
    path: &Path,
    offset: u64,
    h: &RecordHeader,
    body: &[u8],
    control: &Control,
    target: &mut Target<'_>,
) -> Result<u64, CheckpointError> {
    let layout = control.layout;
    let fixed_bytes = layout.fixed_bytes as usize;
    let page = h.a;
    let bad = |reason: &str| corrupt(path, offset, format!("page {page}: {reason}"));
    let bitmap_len = bitmap_bytes(layout.slots_per_page);
    if body.len() < bitmap_len {
        return Err(bad("the record is shorter than its bitmap of live slots"));
    }
    let (bitmap, body) = body.split_at(bitmap_len);
    let tail_bits = layout.slots_per_page % 8;
    if tail_bits != 0 && bitmap[bitmap_len - 1] >> tail_bits != 0 {
        return Err(bad("the bitmap of live slots names slots past the last"));
    }
    let live_slots: u32 = bitmap.iter().map(|b| b.count_ones()).sum();
    if control.kind == CheckpointKind::Full && h.c != live_slots {
        let reason = format!(
            "a full LCP's record holds {} rows of its {live_slots} live slots",
            h.c
        );
        return Err(bad(&reason));
    }
    let listed = target.pages.is_listed(page);
    if listed {
        target.pages.record(page, bitmap, target.member, offset);
    }
    let mut inserted = 0u64;
    let mut at = 0usize;
    let mut last_slot: Option<u16> = None;
    for _ in 0..h.c {
        if at + ROW_HEADER_BYTES + fixed_bytes > body.len() {
            return Err(bad("rows run past the record"));
        }
        let slot = le_u16(body, at);
        let var_len = le_u16(body, at + 2) as usize;
        let in_order = last_slot.is_none_or(|l| l < slot);
        if u32::from(slot) >= layout.slots_per_page || !in_order {
            return Err(bad("slot out of order or range"));
        }
        if bitmap[usize::from(slot) / 8] & (1 << (slot % 8)) == 0 {
            return Err(bad("a row in a slot the bitmap says is not live"));
        }
        if var_len > VAR_PART_BYTES_MAX || (!layout.with_var && var_len > 0) {
            return Err(bad("variable-size part too large or not allowed"));
        }
        let fixed_at = at + ROW_HEADER_BYTES;
        let var_at = fixed_at + fixed_bytes;
        if var_at + var_len > body.len() {
            return Err(bad("rows run past the record"));
        }
        if listed && target.pages.take(page, u32::from(slot)) {
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
            inserted += 1;
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
    Ok(inserted)
}
