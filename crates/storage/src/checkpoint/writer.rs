//! Writing one LCP of one fragment, a few pages per step.

use std::path::{Path, PathBuf};

use crate::disk::{Disk, DiskFile, OpenMode};
use crate::memory::{row_id, row_slot, PagePool, RowStore, VAR_PART_BYTES_MAX};
use crate::RowId;

use super::format::{
    bitmap_bytes, encode_record_header, Control, DataHeader, RowLayout, Trailer, NO_PREVIOUS,
    RECORD_HEADER_BYTES, ROW_HEADER_BYTES, TAG_PAGE, TAG_PAGE_LIST, TAG_TRAILER,
};
use super::{
    control_path, data_path, io_error, temp_path, write_atomically, CheckpointError,
    CheckpointKind, CompletedLcp, LcpStart, Progress, FULL_CHECKPOINT_EVERY, WRITE_CHUNK_BYTES,
};

// Slots and variable-part lengths are stored as u16.
const _: () = assert!(VAR_PART_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(1 << crate::memory::ROW_SLOT_BITS <= u16::MAX as usize + 1);

/// Writes one LCP of one fragment. Start it, call [`CheckpointWriter::step`]
/// between transactions until it says [`Progress::Done`], then
/// [`CheckpointWriter::finish`]. After an error the writer is spent: drop
/// it (its files are debris that [`super::prune`] removes) and start the
/// LCP again under a new id with the same `previous`.
///
/// # An LCP that does not complete
///
/// Steps clear the changed marks of the rows they write. If the LCP then
/// never completes (a step or `finish` fails, or the writer is dropped:
/// abandoned), those rows are in no complete LCP and unmarked, so no
/// partial LCP may build on the chain any more: the next LCP of the row
/// store must be full. [`CheckpointWriter::start`] enforces it: it makes a
/// partial LCP only when `previous` is the LCP that started last on this
/// row store (its generation is the one closed last); after an abandoned
/// or failed one it makes a full LCP whatever `previous` says. One LCP at a
/// time runs on a row store.
pub struct CheckpointWriter {
    start: LcpStart,
    dir: PathBuf,
    kind: CheckpointKind,
    full_lcp_id: u64,
    previous_lcp_id: u64,
    lcps_in_chain: u32,
    generation: u32,
    layout: RowLayout,
    path: PathBuf,
    file: Box<dyn DiskFile>,
    /// The page numbers to write, ascending: taken at the start.
    pages: Vec<u32>,
    /// Pages of `pages` written so far.
    next: usize,
    /// Bitmap of the committed rows of the page being written; reused.
    committed: Vec<u64>,
    /// Rows of the page being written; reused.
    to_write: Vec<RowId>,
    /// Bytes not yet handed to the file; reused.
    buffer: Vec<u8>,
    /// File offset of `buffer[0]`.
    offset: u64,
    /// CRC32C of every byte handed to the file.
    crc: u32,
    rows_written: u64,
    page_list: Option<PageList>,
    failed: bool,
}

#[derive(Copy, Clone, Debug)]
struct PageList {
    offset: u64,
    pages: u32,
}

impl std::fmt::Debug for CheckpointWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointWriter")
            .field("start", &self.start)
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("pages", &self.pages.len())
            .field("next", &self.next)
            .finish()
    }
}

impl CheckpointWriter {
    /// Starts LCP `start.lcp_id` of a fragment whose rows are `rows`:
    /// closes a generation of the row store, decides full or partial,
    /// takes the snapshot of pages to write and writes the data file's
    /// header. `previous` is the fragment's last complete LCP taken of this
    /// row store (or the one [`super::restore`] returned), `None` if there
    /// is none. The LCP is full unless `previous` is also the last LCP
    /// started on this row store (see the type's documentation).
    pub fn start(
        disk: &dyn Disk,
        dir: &Path,
        start: LcpStart,
        previous: Option<&CompletedLcp>,
        rows: &mut RowStore,
    ) -> Result<CheckpointWriter, CheckpointError> {
        Self::start_with_columns(disk, dir, start, 0, previous, rows)
    }

    /// [`CheckpointWriter::start`], recording in the data file that the
    /// rows have the layout of the table's first `columns` columns (its
    /// columns at `start.table_version`), so that a restore under a later
    /// version of the table (columns appended by ALTER TABLE) can convert
    /// them ([`super::newest_complete_version`]). The LDM always says.
    pub fn start_with_columns(
        disk: &dyn Disk,
        dir: &Path,
        start: LcpStart,
        columns: u16,
        previous: Option<&CompletedLcp>,
        rows: &mut RowStore,
    ) -> Result<CheckpointWriter, CheckpointError> {
        if let Some(p) = previous {
            assert!(
                p.lcp_id < start.lcp_id,
                "LCP {} starts after LCP {}: LCP ids must increase",
                start.lcp_id,
                p.lcp_id
            );
            assert!(
                p.generation < rows.generation(),
                "{p:?} is of another row store"
            );
        }
        let started_last = previous.filter(|p| p.generation + 1 == rows.generation());
        let layout = RowLayout {
            fixed_bytes: rows.fixed_bytes() as u32,
            with_var: rows.has_var_parts(),
            slots_per_page: rows.slots_per_page(),
        };
        let (kind, pages) = Self::choose(started_last, &start, layout, rows);
        let generation = rows.mark_checkpoint();
        let (full_lcp_id, previous_lcp_id, lcps_in_chain) = match (kind, started_last) {
            (CheckpointKind::Partial, Some(p)) => (p.full_lcp_id, p.lcp_id, p.lcps_in_chain + 1),
            _ => (start.lcp_id, NO_PREVIOUS, 1),
        };
        assert!(lcps_in_chain <= FULL_CHECKPOINT_EVERY);
        disk.create_dir_all(dir)
            .map_err(|e| io_error("create directory", dir, 0, e))?;
        let path = data_path(dir, start.table_id, start.fragment_id, start.lcp_id);
        let file = disk
            .open(&path, OpenMode::CreateTruncate)
            .map_err(|e| io_error("create", &path, 0, e))?;
        let header = DataHeader {
            table_id: start.table_id,
            table_version: start.table_version,
            fragment_id: start.fragment_id,
            lcp_id: start.lcp_id,
            full_lcp_id,
            kind,
            layout,
            columns,
        };
        let mut buffer = Vec::with_capacity(WRITE_CHUNK_BYTES + layout_page_bytes(layout));
        buffer.extend_from_slice(&header.encode());
        Ok(CheckpointWriter {
            start,
            dir: dir.to_path_buf(),
            kind,
            full_lcp_id,
            previous_lcp_id,
            lcps_in_chain,
            generation,
            layout,
            path,
            file,
            pages,
            next: 0,
            committed: Vec::with_capacity(layout.slots_per_page.div_ceil(64) as usize),
            to_write: Vec::with_capacity(layout.slots_per_page as usize),
            buffer,
            offset: 0,
            crc: 0,
            rows_written: 0,
            page_list: None,
            failed: false,
        })
    }

    /// Full or partial, and the pages to write. `started_last` is the
    /// previous LCP if it is the last one started on this row store.
    fn choose(
        started_last: Option<&CompletedLcp>,
        start: &LcpStart,
        layout: RowLayout,
        rows: &RowStore,
    ) -> (CheckpointKind, Vec<u32>) {
        let partial_base = started_last.filter(|p| {
            p.lcps_in_chain < FULL_CHECKPOINT_EVERY
                && p.table_version == start.table_version
                && p.fixed_bytes == layout.fixed_bytes
                && p.with_var == layout.with_var
        });
        // More than half of the rows changed: the full LCP is hardly
        // larger, and it starts a new chain that restore reads faster.
        let few_changed = rows.changed_rows() * 2 <= rows.row_count();
        if let Some(p) = partial_base.filter(|_| few_changed) {
            // Every marked row is in a page changed since `p` began: the
            // LCPs of the chain wrote (and unmarked) every row of the pages
            // they visited, and a row changed since is stamped with a later
            // generation.
            let changed: Vec<u32> = rows.changed_pages_since(p.generation).collect();
            return (CheckpointKind::Partial, changed);
        }
        let all = (0..rows.page_count())
            .filter(|&page| has_rows(rows, page))
            .collect();
        (CheckpointKind::Full, all)
    }

    pub fn kind(&self) -> CheckpointKind {
        self.kind
    }

    pub fn lcp_id(&self) -> u64 {
        self.start.lcp_id
    }

    /// The page numbers this LCP writes, ascending (the snapshot taken at
    /// the start).
    pub fn pages(&self) -> &[u32] {
        &self.pages
    }

    /// How many of [`CheckpointWriter::pages`] are written: the first
    /// `pages_written()` of them.
    pub fn pages_written(&self) -> usize {
        self.next
    }

    /// Bytes of the data file so far (written or buffered).
    pub fn bytes_written(&self) -> u64 {
        self.offset + self.buffer.len() as u64
    }

    /// Writes up to `pages_max` more pages of the snapshot, each as its
    /// committed rows are now (a full LCP: every row; a partial one: the
    /// rows marked changed), and clears the changed marks of the rows it
    /// wrote; the step that writes the last page also writes the list of
    /// pages in use now.
    pub fn step(
        &mut self,
        pool: &PagePool,
        rows: &mut RowStore,
        pages_max: usize,
    ) -> Result<Progress, CheckpointError> {
        assert!(!self.failed, "{}: step after an error", self.path.display());
        assert!(pages_max > 0, "a step must make progress");
        self.check_layout(rows);
        assert_eq!(
            rows.generation(),
            self.generation + 1,
            "{}: another LCP started on this row store while this one runs",
            self.path.display()
        );
        let end = self.pages.len().min(self.next + pages_max);
        while self.next < end {
            let page = self.pages[self.next];
            self.write_page(pool, rows, page);
            self.next += 1;
            if self.buffer.len() >= WRITE_CHUNK_BYTES {
                self.flush()?;
            }
        }
        if self.next == self.pages.len() && self.page_list.is_none() {
            self.write_page_list(rows);
        }
        self.flush()?;
        Ok(if self.page_list.is_some() {
            Progress::Done
        } else {
            Progress::More
        })
    }

    /// Writes the trailer, makes the data file durable, then writes the
    /// control file atomically: from then on the LCP is complete. Returns
    /// what the next LCP of this fragment builds on.
    pub fn finish(mut self, disk: &dyn Disk) -> Result<CompletedLcp, CheckpointError> {
        assert!(
            !self.failed,
            "{}: finish after an error",
            self.path.display()
        );
        let Some(list) = self.page_list else {
            panic!("{}: finish before step said Done", self.path.display());
        };
        let trailer = Trailer {
            page_records: self.pages.len() as u32,
            pages_in_list: list.pages,
            rows: self.rows_written,
            page_list_offset: list.offset,
        };
        let at = self.begin_record();
        self.buffer.extend_from_slice(&trailer.encode());
        self.end_record(at, TAG_TRAILER, 0, 0);
        self.flush()?;
        self.file
            .sync()
            .map_err(|e| io_error("fsync", &self.path, 0, e))?;
        // The data file's name must be durable before a control file that
        // vouches for it can be.
        disk.sync_dir(&self.dir)
            .map_err(|e| io_error("fsync directory", &self.dir, 0, e))?;
        let control = Control {
            kind: self.kind,
            lcps_in_chain: self.lcps_in_chain as u16,
            lcp_id: self.start.lcp_id,
            full_lcp_id: self.full_lcp_id,
            previous_lcp_id: self.previous_lcp_id,
            redo_start: self.start.redo_start,
            max_gci: self.start.max_gci,
            table_id: self.start.table_id,
            table_version: self.start.table_version,
            fragment_id: self.start.fragment_id,
            data_bytes: self.offset,
            data_crc: self.crc,
            layout: self.layout,
            page_list_offset: list.offset,
        };
        let (t, f, id) = (
            self.start.table_id,
            self.start.fragment_id,
            self.start.lcp_id,
        );
        write_atomically(
            disk,
            &self.dir,
            &temp_path(&self.dir, t, f, id),
            &control_path(&self.dir, t, f, id),
            &control.encode(),
        )?;
        Ok(CompletedLcp {
            lcp_id: id,
            kind: self.kind,
            full_lcp_id: self.full_lcp_id,
            lcps_in_chain: self.lcps_in_chain,
            table_version: self.start.table_version,
            redo_start: self.start.redo_start,
            max_gci: self.start.max_gci,
            generation: self.generation,
            fixed_bytes: self.layout.fixed_bytes,
            with_var: self.layout.with_var,
            data_bytes: self.offset,
            pages_written: self.pages.len() as u32,
            rows_written: self.rows_written,
        })
    }

    fn check_layout(&self, rows: &RowStore) {
        assert!(
            rows.fixed_bytes() as u32 == self.layout.fixed_bytes
                && rows.has_var_parts() == self.layout.with_var,
            "{}: stepped with another fragment's row store",
            self.path.display()
        );
    }

    /// One page record: the bitmap of the page's live, committed slots,
    /// then its rows in slot order — every such row for a full LCP, those
    /// marked changed for a partial one — whose marks are then cleared. An
    /// uncommitted insert is left out (and keeps its mark): it is not in
    /// the committed state the LCP stands for, and its commit comes through
    /// the redo log and marks it again.
    fn write_page(&mut self, pool: &PagePool, rows: &mut RowStore, page: u32) {
        let at = self.begin_record();
        rows.committed_slots(pool, page, &mut self.committed);
        let bitmap_start = self.buffer.len();
        for word in &self.committed {
            self.buffer.extend_from_slice(&word.to_le_bytes());
        }
        // Bits past the last slot are zero, so the bytes cut off are too.
        self.buffer
            .truncate(bitmap_start + bitmap_bytes(self.layout.slots_per_page));
        let committed = &self.committed;
        let is_committed = |slot: u32| committed[slot as usize / 64] & (1 << (slot % 64)) != 0;
        self.to_write.clear();
        match self.kind {
            CheckpointKind::Full => {
                for (w, &word) in committed.iter().enumerate() {
                    let mut bits = word;
                    while bits != 0 {
                        let slot = w as u32 * 64 + bits.trailing_zeros();
                        bits &= bits - 1;
                        self.to_write.push(row_id(page, slot));
                    }
                }
            }
            CheckpointKind::Partial => self.to_write.extend(
                rows.page_changed_rows(page)
                    .filter(|&row| is_committed(row_slot(row))),
            ),
        }
        let mut count = 0u32;
        for &row in &self.to_write {
            let fixed = rows.fixed(pool, row);
            let var = rows.var(pool, row);
            debug_assert_eq!(fixed.len(), self.layout.fixed_bytes as usize);
            debug_assert!(var.len() <= VAR_PART_BYTES_MAX);
            self.buffer
                .extend_from_slice(&(row_slot(row) as u16).to_le_bytes());
            self.buffer
                .extend_from_slice(&(var.len() as u16).to_le_bytes());
            self.buffer.extend_from_slice(fixed);
            self.buffer.extend_from_slice(var);
            rows.clear_changed(row);
            count += 1;
        }
        debug_assert!(count <= self.layout.slots_per_page);
        self.rows_written += u64::from(count);
        self.end_record(at, TAG_PAGE, page, count);
    }

    /// Every page that holds a row now, ascending: restore empties the
    /// others.
    fn write_page_list(&mut self, rows: &RowStore) {
        let offset = self.bytes_written();
        let at = self.begin_record();
        let mut count = 0u32;
        for page in (0..rows.page_count()).filter(|&page| has_rows(rows, page)) {
            self.buffer.extend_from_slice(&page.to_le_bytes());
            count += 1;
        }
        self.end_record(at, TAG_PAGE_LIST, count, 0);
        self.page_list = Some(PageList {
            offset,
            pages: count,
        });
    }

    /// Reserves a record header in the buffer; returns where it starts.
    fn begin_record(&mut self) -> usize {
        let at = self.buffer.len();
        self.buffer.resize(at + RECORD_HEADER_BYTES, 0);
        at
    }

    /// Abandons this LCP and removes its data file (no control file names
    /// it, so nothing reads it): an LCP round that fails on a full disk
    /// must not leave a file behind per try. A file already gone is fine.
    /// The removal is not synced: a name that a crash brings back is
    /// debris that [`super::prune`] removes.
    pub fn discard(self, disk: &dyn Disk) -> Result<(), CheckpointError> {
        let path = self.path.clone();
        drop(self);
        match disk.remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("remove", &path, 0, e)),
        }
    }

    /// Fills in the header of the record that starts at `at` and appends
    /// its CRC.
    fn end_record(&mut self, at: usize, tag: u8, a: u32, c: u32) {
        let body = self.buffer.len() - at - RECORD_HEADER_BYTES;
        let body = u32::try_from(body).expect("a record body fits in u32");
        encode_record_header(&mut self.buffer[at..], tag, body, a, c);
        let crc = crc32c::crc32c(&self.buffer[at..]);
        self.buffer.extend_from_slice(&crc.to_le_bytes());
    }

    /// Hands the buffer to the file.
    fn flush(&mut self) -> Result<(), CheckpointError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.file.write_at(self.offset, &self.buffer) {
            self.failed = true;
            return Err(io_error("write", &self.path, self.offset, e));
        }
        self.crc = crc32c::crc32c_append(self.crc, &self.buffer);
        self.offset += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

fn has_rows(rows: &RowStore, page: u32) -> bool {
    rows.page_rows(page).next().is_some()
}

/// Bytes of a page record with every slot used and no variable-size parts:
/// the buffer's starting room beyond one chunk.
fn layout_page_bytes(layout: RowLayout) -> usize {
    let row = ROW_HEADER_BYTES + layout.fixed_bytes as usize;
    RECORD_HEADER_BYTES + layout.slots_per_page as usize * row + 4
}
