//! The dictionary's files: one per table group, a meta file with the
//! schema's counters, and the record of the schema transaction in flight.
//!
//! Every file is written whole and atomically — to `<name>.tmp`, fsynced,
//! renamed over `<name>`, and the directory fsynced — so that a crash
//! leaves the old file or the new one, never a mix; leftover `.tmp` files
//! are removed at load. Every file carries a CRC32C over its body; a file
//! that fails it is reported with its path and never used.
//!
//! A schema transaction is made durable in two steps that mirror the
//! protocol: *prepare* writes `trans.prepared`; *commit* renames it to
//! `trans.committed` (the durable decision), then rewrites or removes the
//! group file and the meta file, then removes `trans.committed`. A load
//! that finds `trans.committed` finishes that work; one that finds
//! `trans.prepared` drops it (the transaction's outcome is the master's to
//! tell, and a starting node takes the master's schema when it joins).
//!
//! File layout (little-endian), byte by byte in `docs/dictionary.md`:
//!
//! ```text
//! 0  4  magic "SKDF"
//! 4  2  format version (1)
//! 6  1  kind: 1 table group, 2 meta, 3 transaction record
//! 7  1  reserved (0)
//! 8  4  body length in bytes
//! 12 4  CRC32C of the body
//! 16 …  body
//! ```

use std::io;
use std::path::{Path, PathBuf};

use signal::SchemaOp;
use storage::disk::{Disk, OpenMode};

use super::schema::{GroupError, Schema, TableGroup};

/// First bytes of every dictionary file.
pub const SCHEMA_FILE_MAGIC: [u8; 4] = *b"SKDF";
/// The file format this build writes and the newest it reads.
pub const SCHEMA_FILE_FORMAT: u16 = 1;
/// Bytes of the header in front of every file's body.
pub const SCHEMA_FILE_HEADER_BYTES: usize = 16;
/// Largest dictionary file read: far above any group (a table definition
/// is at most a few hundred KiB), small enough to read into memory.
pub const SCHEMA_FILE_BYTES_MAX: u64 = 64 << 20;

const META_FILE: &str = "schema.meta";
const PREPARED_FILE: &str = "trans.prepared";
const COMMITTED_FILE: &str = "trans.committed";
const TMP_SUFFIX: &str = ".tmp";
const GROUP_PREFIX: &str = "table_";
const GROUP_SUFFIX: &str = ".def";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileKind {
    Group = 1,
    Meta = 2,
    /// A transaction record; `trans.committed` is a renamed prepared
    /// record, so the name, not this byte, tells the two apart.
    Prepared = 3,
}

/// Why the dictionary's files could not be read or written. Every variant
/// names the file.
#[derive(Debug, thiserror::Error)]
pub enum DictionaryError {
    #[error("{path}: cannot {action}: {source}")]
    Io {
        path: PathBuf,
        action: &'static str,
        source: io::Error,
    },
    #[error("{path}: corrupt dictionary file: {problem}")]
    Corrupt { path: PathBuf, problem: String },
    #[error("{path}: {source}")]
    BadGroup { path: PathBuf, source: GroupError },
}

/// A schema transaction as it is persisted while in flight.
#[derive(Clone, Debug, PartialEq)]
pub struct TransRecord {
    pub trans_id: u64,
    pub op: SchemaOp,
    /// The base table the transaction changes.
    pub table_id: u32,
    /// The schema's counters once the transaction is committed.
    pub schema_version: u32,
    pub next_object_id: u32,
    /// The group after the transaction; `None` for a drop.
    pub group: Option<TableGroup>,
}

/// What loading found besides the schema, for the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// A committed transaction whose files were finished at load.
    pub finished_commit: Option<u64>,
    /// A prepared transaction dropped at load.
    pub dropped_prepared: Option<u64>,
    /// Leftover temporary files removed.
    pub removed_tmp: usize,
}

/// The dictionary's directory on one node's disk.
pub struct SchemaStore {
    disk: Box<dyn Disk>,
    dir: PathBuf,
}

fn io_error(path: &Path, action: &'static str) -> impl FnOnce(io::Error) -> DictionaryError {
    let path = path.to_path_buf();
    move |source| DictionaryError::Io {
        path,
        action,
        source,
    }
}

fn corrupt(path: &Path, problem: impl Into<String>) -> DictionaryError {
    DictionaryError::Corrupt {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

impl SchemaStore {
    /// Opens (creating it if needed) the directory and loads the schema.
    pub fn open(
        disk: Box<dyn Disk>,
        dir: PathBuf,
    ) -> Result<(SchemaStore, Schema, LoadReport), DictionaryError> {
        disk.create_dir_all(&dir)
            .map_err(io_error(&dir, "create the directory"))?;
        let store = SchemaStore { disk, dir };
        let (schema, report) = store.load()?;
        Ok((store, schema, report))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the file holding group `base`.
    pub fn group_path(&self, base: u32) -> PathBuf {
        self.dir.join(format!("{GROUP_PREFIX}{base}{GROUP_SUFFIX}"))
    }

    fn load(&self) -> Result<(Schema, LoadReport), DictionaryError> {
        let mut report = LoadReport::default();
        let mut schema = Schema::new();
        let entries = self
            .disk
            .list_dir(&self.dir)
            .map_err(io_error(&self.dir, "list the directory"))?;
        let mut groups = Vec::new();
        let mut meta = None;
        let mut prepared = false;
        let mut committed = false;
        for path in entries {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                tracing::warn!("{}: not a dictionary file; ignored", path.display());
                continue;
            };
            if name.ends_with(TMP_SUFFIX) {
                self.disk
                    .remove_file(&path)
                    .map_err(io_error(&path, "remove a leftover temporary file"))?;
                report.removed_tmp += 1;
            } else if name == META_FILE {
                meta = Some(path);
            } else if name == PREPARED_FILE {
                prepared = true;
            } else if name == COMMITTED_FILE {
                committed = true;
            } else if let Some(base) = name
                .strip_prefix(GROUP_PREFIX)
                .and_then(|n| n.strip_suffix(GROUP_SUFFIX))
                .and_then(|n| n.parse::<u32>().ok())
            {
                groups.push((base, path));
            } else {
                tracing::warn!("{}: not a dictionary file; ignored", path.display());
            }
        }
        if let Some(path) = meta {
            let body = self.read(&path, FileKind::Meta)?;
            let mut r = BodyReader::new(&path, &body);
            let version = r.u32()?;
            let next_object_id = r.u32()?;
            r.end()?;
            schema.set_counters(version, next_object_id);
        }
        for (base, path) in groups {
            let body = self.read(&path, FileKind::Group)?;
            let mut r = BodyReader::new(&path, &body);
            let stored_base = r.u32()?;
            let group = r.group()?;
            r.end()?;
            if stored_base != base || group.base().id != base {
                return Err(corrupt(
                    &path,
                    format!(
                        "holds group {stored_base} with base table id {}",
                        group.base().id
                    ),
                ));
            }
            schema
                .check_install(&group)
                .map_err(|p| corrupt(&path, p))?;
            schema.install(group);
        }
        if committed {
            let path = self.dir.join(COMMITTED_FILE);
            let record = self.read_trans(&path)?;
            if let Some(group) = &record.group {
                schema.check_install(group).map_err(|p| corrupt(&path, p))?;
            }
            self.finish_commit(&record)?;
            apply(&mut schema, &record);
            report.finished_commit = Some(record.trans_id);
        }
        if prepared {
            let path = self.dir.join(PREPARED_FILE);
            // Dropped either way; its id is only for the log.
            let trans_id = match self.read_trans(&path) {
                Ok(record) => record.trans_id,
                Err(e) => {
                    tracing::warn!("{e}; dropped with the prepared transaction");
                    0
                }
            };
            self.clear_prepared()?;
            report.dropped_prepared = Some(trans_id);
        }
        Ok((schema, report))
    }

    /// Reads a whole file and checks its header and checksum; returns the body.
    fn read(&self, path: &Path, kind: FileKind) -> Result<Vec<u8>, DictionaryError> {
        let file = self
            .disk
            .open(path, OpenMode::ReadOnly)
            .map_err(io_error(path, "open"))?;
        let len = file.len().map_err(io_error(path, "read the length of"))?;
        if len > SCHEMA_FILE_BYTES_MAX {
            return Err(corrupt(
                path,
                format!("{len} bytes, at most {SCHEMA_FILE_BYTES_MAX} expected"),
            ));
        }
        let mut bytes = vec![0u8; len as usize];
        let read = file
            .read_full_at(0, &mut bytes)
            .map_err(io_error(path, "read"))?;
        if read != bytes.len() {
            return Err(corrupt(
                path,
                format!("{read} of {len} bytes could be read"),
            ));
        }
        if bytes.len() < SCHEMA_FILE_HEADER_BYTES {
            return Err(corrupt(
                path,
                format!("{len} bytes, shorter than the {SCHEMA_FILE_HEADER_BYTES}-byte header"),
            ));
        }
        let header = &bytes[..SCHEMA_FILE_HEADER_BYTES];
        if header[0..4] != SCHEMA_FILE_MAGIC {
            return Err(corrupt(path, format!("bad magic {:02x?}", &header[0..4])));
        }
        let format = u16::from_le_bytes([header[4], header[5]]);
        if format == 0 || format > SCHEMA_FILE_FORMAT {
            return Err(corrupt(
                path,
                format!("format {format}, this build reads up to {SCHEMA_FILE_FORMAT}"),
            ));
        }
        if header[6] != kind as u8 {
            return Err(corrupt(
                path,
                format!("file kind {}, expected {}", header[6], kind as u8),
            ));
        }
        let body_len = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        let crc = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
        let body = &bytes[SCHEMA_FILE_HEADER_BYTES..];
        if body.len() != body_len as usize {
            return Err(corrupt(
                path,
                format!(
                    "the header gives a {body_len}-byte body, the file holds {}",
                    body.len()
                ),
            ));
        }
        let actual = crc32c::crc32c(body);
        if actual != crc {
            return Err(corrupt(
                path,
                format!("checksum mismatch (header {crc:#010x}, body {actual:#010x})"),
            ));
        }
        bytes.drain(..SCHEMA_FILE_HEADER_BYTES);
        Ok(bytes)
    }

    /// Writes `name` whole: a temporary file, fsync, rename, directory fsync.
    fn write_atomic(&self, name: &str, kind: FileKind, body: &[u8]) -> Result<(), DictionaryError> {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!("{name}{TMP_SUFFIX}"));
        let body_len = u32::try_from(body.len()).map_err(|_| {
            corrupt(
                &path,
                format!("a body of {} bytes does not fit", body.len()),
            )
        })?;
        assert!(
            (body.len() + SCHEMA_FILE_HEADER_BYTES) as u64 <= SCHEMA_FILE_BYTES_MAX,
            "dictionary file {} of {} bytes is above SCHEMA_FILE_BYTES_MAX",
            path.display(),
            body.len()
        );
        let mut bytes = Vec::with_capacity(SCHEMA_FILE_HEADER_BYTES + body.len());
        bytes.extend_from_slice(&SCHEMA_FILE_MAGIC);
        bytes.extend_from_slice(&SCHEMA_FILE_FORMAT.to_le_bytes());
        bytes.push(kind as u8);
        bytes.push(0);
        bytes.extend_from_slice(&body_len.to_le_bytes());
        bytes.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
        bytes.extend_from_slice(body);
        storage::disk::write_file_atomically(self.disk.as_ref(), &tmp, &path, &bytes)
            .map_err(|e| io_error(&e.path, e.step)(e.source))
    }

    fn sync_dir(&self) -> Result<(), DictionaryError> {
        self.disk
            .sync_dir(&self.dir)
            .map_err(io_error(&self.dir, "fsync the directory"))
    }

    fn remove(&self, name: &str) -> Result<(), DictionaryError> {
        let path = self.dir.join(name);
        let exists = self
            .disk
            .exists(&path)
            .map_err(io_error(&path, "look up"))?;
        if exists {
            self.disk
                .remove_file(&path)
                .map_err(io_error(&path, "remove"))?;
            self.sync_dir()?;
        }
        Ok(())
    }

    fn group_file_name(base: u32) -> String {
        format!("{GROUP_PREFIX}{base}{GROUP_SUFFIX}")
    }

    /// Writes (or replaces) the file of a group.
    pub fn write_group(&self, group: &TableGroup) -> Result<(), DictionaryError> {
        let base = group.base().id;
        let mut body = Vec::with_capacity(8 + group.encoded_bytes() + 4 * group.tables().len());
        body.extend_from_slice(&base.to_le_bytes());
        put_group(&mut body, group);
        self.write_atomic(&Self::group_file_name(base), FileKind::Group, &body)
    }

    /// Removes the file of group `base`, if there is one.
    pub fn remove_group(&self, base: u32) -> Result<(), DictionaryError> {
        self.remove(&Self::group_file_name(base))
    }

    /// Writes the schema's counters.
    pub fn write_meta(&self, version: u32, next_object_id: u32) -> Result<(), DictionaryError> {
        let mut body = Vec::with_capacity(8);
        body.extend_from_slice(&version.to_le_bytes());
        body.extend_from_slice(&next_object_id.to_le_bytes());
        self.write_atomic(META_FILE, FileKind::Meta, &body)
    }

    /// Prepare: the transaction is durable as prepared on this node.
    pub fn write_prepared(&self, record: &TransRecord) -> Result<(), DictionaryError> {
        let mut body = Vec::new();
        body.extend_from_slice(&record.trans_id.to_le_bytes());
        body.push(record.op as u8);
        body.extend_from_slice(&record.table_id.to_le_bytes());
        body.extend_from_slice(&record.schema_version.to_le_bytes());
        body.extend_from_slice(&record.next_object_id.to_le_bytes());
        match &record.group {
            Some(group) => {
                body.push(1);
                put_group(&mut body, group);
            }
            None => body.push(0),
        }
        self.write_atomic(PREPARED_FILE, FileKind::Prepared, &body)
    }

    /// Commit: makes the prepared transaction the durable decision, then
    /// writes its files and drops the record. The record must be the one
    /// [`SchemaStore::write_prepared`] wrote last.
    pub fn commit(&self, record: &TransRecord) -> Result<(), DictionaryError> {
        let prepared = self.dir.join(PREPARED_FILE);
        let committed = self.dir.join(COMMITTED_FILE);
        // The prepared file says "committed" once renamed: one atomic step.
        // Its kind byte still says "prepared"; the name decides.
        self.disk
            .rename(&prepared, &committed)
            .map_err(io_error(&committed, "rename the prepared transaction to"))?;
        self.sync_dir()?;
        self.finish_commit(record)
    }

    /// Writes the files of a committed transaction and drops its record;
    /// safe to repeat.
    fn finish_commit(&self, record: &TransRecord) -> Result<(), DictionaryError> {
        match &record.group {
            Some(group) => self.write_group(group)?,
            None => self.remove_group(record.table_id)?,
        }
        self.write_meta(record.schema_version, record.next_object_id)?;
        self.remove(COMMITTED_FILE)
    }

    /// Abort: forgets the prepared transaction.
    pub fn clear_prepared(&self) -> Result<(), DictionaryError> {
        self.remove(PREPARED_FILE)
    }

    /// Reads `trans.prepared` or `trans.committed` (a renamed prepared
    /// file: its kind byte says prepared).
    fn read_trans(&self, path: &Path) -> Result<TransRecord, DictionaryError> {
        let body = self.read(path, FileKind::Prepared)?;
        let mut r = BodyReader::new(path, &body);
        let trans_id = r.u64()?;
        let op = match r.u8()? {
            1 => SchemaOp::CreateTable,
            2 => SchemaOp::AlterTable,
            3 => SchemaOp::DropTable,
            other => return Err(corrupt(path, format!("unknown schema operation {other}"))),
        };
        let table_id = r.u32()?;
        let schema_version = r.u32()?;
        let next_object_id = r.u32()?;
        let group = match r.u8()? {
            0 => None,
            1 => Some(r.group()?),
            other => return Err(corrupt(path, format!("bad group flag {other}"))),
        };
        r.end()?;
        if let Some(group) = &group {
            if group.base().id != table_id {
                return Err(corrupt(
                    path,
                    format!(
                        "transaction on table {table_id} holds table {}",
                        group.base().id
                    ),
                ));
            }
        }
        Ok(TransRecord {
            trans_id,
            op,
            table_id,
            schema_version,
            next_object_id,
            group,
        })
    }
}

/// Applies a committed transaction to the schema in memory.
pub fn apply(schema: &mut Schema, record: &TransRecord) {
    match &record.group {
        Some(group) => schema.install(group.clone()),
        None => {
            schema.remove(record.table_id);
        }
    }
    schema.set_counters(record.schema_version, record.next_object_id);
}

/// `u16 count, count × (u32 length, encoded TableDef)`.
fn put_group(out: &mut Vec<u8>, group: &TableGroup) {
    let count = u16::try_from(group.encoded().len()).expect("a group holds at most 577 tables");
    out.extend_from_slice(&count.to_le_bytes());
    for bytes in group.encoded() {
        let len = u32::try_from(bytes.len()).expect("a table definition is below 4 GiB");
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(bytes);
    }
}

/// Reads a file body; every error names the file and the offset.
struct BodyReader<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> BodyReader<'a> {
    fn new(path: &'a Path, bytes: &'a [u8]) -> BodyReader<'a> {
        BodyReader {
            path,
            bytes,
            offset: 0,
        }
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DictionaryError> {
        let left = self.bytes.len() - self.offset;
        if len > left {
            return Err(corrupt(
                self.path,
                format!(
                    "body offset {}: {len} bytes needed, {left} left",
                    self.offset
                ),
            ));
        }
        let slice = &self.bytes[self.offset..self.offset + len];
        self.offset += len;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, DictionaryError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DictionaryError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DictionaryError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, DictionaryError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn group(&mut self) -> Result<TableGroup, DictionaryError> {
        let count = usize::from(self.u16()?);
        let mut encoded = Vec::with_capacity(count.min(self.bytes.len() / 4));
        for _ in 0..count {
            let len = self.u32()? as usize;
            encoded.push(self.take(len)?.to_vec());
        }
        TableGroup::decode(encoded).map_err(|source| DictionaryError::BadGroup {
            path: self.path.to_path_buf(),
            source,
        })
    }

    fn end(&self) -> Result<(), DictionaryError> {
        if self.offset != self.bytes.len() {
            return Err(corrupt(
                self.path,
                format!(
                    "{} bytes after the end of the body",
                    self.bytes.len() - self.offset
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schema::{Column, ColumnType, TableDef};
    use storage::disk::SimDisk;

    fn dir() -> PathBuf {
        PathBuf::from("/data/ndb_2_fs/schema")
    }

    fn group(id: u32, name: &str) -> TableGroup {
        let mut table = TableDef::new(name, id, vec![Column::new("a", ColumnType::Double)])
            .build()
            .unwrap();
        table.version = 1;
        TableGroup::from_tables(vec![table])
    }

    fn record(trans_id: u64, group: TableGroup, schema_version: u32) -> TransRecord {
        TransRecord {
            trans_id,
            op: SchemaOp::CreateTable,
            table_id: group.base().id,
            schema_version,
            next_object_id: group.base().id + 1,
            group: Some(group),
        }
    }

    fn open(disk: &SimDisk) -> (SchemaStore, Schema, LoadReport) {
        SchemaStore::open(Box::new(disk.clone()), dir()).unwrap()
    }

    fn names(schema: &Schema) -> Vec<String> {
        schema.tables().map(|t| t.name.clone()).collect()
    }

    #[test]
    fn a_commit_survives_a_crash_and_a_prepare_alone_does_not() {
        let disk = SimDisk::new(1);
        let (store, schema, _) = open(&disk);
        assert_eq!(schema, Schema::new());
        store.write_prepared(&record(7, group(16, "a"), 1)).unwrap();
        store.commit(&record(7, group(16, "a"), 1)).unwrap();
        store.write_prepared(&record(8, group(17, "b"), 2)).unwrap();
        disk.crash();
        let (_, schema, report) = open(&disk);
        assert_eq!(names(&schema), ["a"]);
        assert_eq!((schema.version(), schema.next_object_id()), (1, 17));
        assert_eq!(report.dropped_prepared, Some(8));
        assert_eq!(report.finished_commit, None);
        assert!(!disk.exists(&dir().join(PREPARED_FILE)).unwrap());
        assert_eq!(schema.encoded(16), Some(&group(16, "a").encoded()[0][..]));
    }

    #[test]
    fn a_decided_commit_is_finished_at_load() {
        let disk = SimDisk::new(2);
        let (store, _, _) = open(&disk);
        store.write_prepared(&record(9, group(20, "c"), 5)).unwrap();
        // The first step of commit, then a crash before the files.
        disk.rename(&dir().join(PREPARED_FILE), &dir().join(COMMITTED_FILE))
            .unwrap();
        disk.sync_dir(&dir()).unwrap();
        disk.crash();
        let (_, schema, report) = open(&disk);
        assert_eq!(report.finished_commit, Some(9));
        assert_eq!(names(&schema), ["c"]);
        assert_eq!(schema.version(), 5);
        assert!(!disk.exists(&dir().join(COMMITTED_FILE)).unwrap());
        // Finishing wrote the files: a second load needs no record.
        let (_, again, report) = open(&disk);
        assert_eq!(again, schema);
        assert_eq!(report, LoadReport::default());
    }

    #[test]
    fn a_drop_removes_the_file_and_leftover_temporary_files_go() {
        let disk = SimDisk::new(3);
        let (store, _, _) = open(&disk);
        store.write_prepared(&record(1, group(16, "a"), 1)).unwrap();
        store.commit(&record(1, group(16, "a"), 1)).unwrap();
        let drop = TransRecord {
            trans_id: 2,
            op: SchemaOp::DropTable,
            table_id: 16,
            schema_version: 2,
            next_object_id: 17,
            group: None,
        };
        store.write_prepared(&drop).unwrap();
        store.commit(&drop).unwrap();
        let tmp = dir().join("table_99.def.tmp");
        disk.open(&tmp, OpenMode::CreateTruncate).unwrap();
        disk.sync_dir(&dir()).unwrap();
        disk.crash();
        let (store, schema, report) = open(&disk);
        assert_eq!(schema.table_count(), 0);
        assert_eq!(schema.version(), 2);
        assert_eq!(report.removed_tmp, 1);
        assert!(!disk.exists(&store.group_path(16)).unwrap());
        assert!(!disk.exists(&tmp).unwrap());
    }

    #[test]
    fn crashes_at_any_point_leave_the_old_or_the_new_schema() {
        // A commit cut short by a failing sync, then a crash that keeps,
        // tears or loses each unsynced write by the seed: the load sees
        // either schema, never a mix, and never fails.
        for seed in 0..200u64 {
            let disk = SimDisk::new(seed);
            let (store, _, _) = open(&disk);
            store.write_prepared(&record(1, group(16, "a"), 1)).unwrap();
            store.commit(&record(1, group(16, "a"), 1)).unwrap();
            let next = record(2, group(17, "b"), 2);
            disk.fail_writes_after(seed % 180);
            let result = store
                .write_prepared(&next)
                .and_then(|()| store.commit(&next));
            disk.clear_faults();
            disk.crash();
            let (_, schema, _) = open(&disk);
            match schema.version() {
                1 => assert_eq!(names(&schema), ["a"], "seed {seed}"),
                2 => assert_eq!(names(&schema), ["a", "b"], "seed {seed}"),
                other => panic!("seed {seed}: version {other}"),
            }
            if result.is_ok() {
                assert_eq!(
                    schema.version(),
                    2,
                    "seed {seed}: a finished commit is kept"
                );
            }
        }
    }

    #[test]
    fn damaged_files_are_refused_with_their_path() {
        let disk = SimDisk::new(4);
        let (store, _, _) = open(&disk);
        store.write_group(&group(16, "a")).unwrap();
        let path = store.group_path(16);
        let len = disk.durable_contents(&path).unwrap().len() as u64;
        for (offset, expected) in [
            (0, "bad magic"),
            (6, "file kind"),
            (8, "body"),
            (30, "checksum"),
        ] {
            disk.flip_byte(&path, offset).unwrap();
            let error = SchemaStore::open(Box::new(disk.clone()), dir())
                .err()
                .unwrap();
            let message = error.to_string();
            assert!(message.contains("table_16.def"), "{message}");
            assert!(message.contains(expected), "offset {offset}: {message}");
            disk.flip_byte(&path, offset).unwrap();
        }
        disk.truncate(&path, len - 1).unwrap();
        let error = SchemaStore::open(Box::new(disk.clone()), dir())
            .err()
            .unwrap();
        assert!(error.to_string().contains("body"), "{error}");
    }
}
