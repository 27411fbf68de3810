//! The LDM's logical redo records and where they go.
//!
//! A committing transaction leaves one record per changed row in the redo
//! log part of its LDM instance; recovery replays them into the fragment
//! (on top of its local checkpoint) by primary key, so a record must carry
//! everything a replay needs and nothing that depends on where the row
//! lived (no row id). The layout is drawn in `docs/redo-format.md`
//! ("LDM records"); changing it is a format change.
//!
//! ```text
//! offset 0   u8   format version (2)
//! offset 1   u8   kind: 1 insert, 2 update, 3 delete
//! offset 2   u16  primary-key length k
//! offset 4   u32  table id
//! offset 8   u32  table version (the row layout of the image)
//! offset 12  u32  fragment id
//! offset 16  u16  fixed-part length f (0 for delete)
//! offset 18  u16  var-part length v (0 for delete)
//! offset 20  u16  columns of the image's layout (the table's columns at that version)
//! offset 22  k    primary key, memcomparable (schema::key)
//! offset 22+k f   fixed part of the new row image (schema::row)
//! offset ..  v    var part of the new row image
//! ```
//!
//! All integers little-endian. Insert and update both carry the whole new
//! image, so that replay is an idempotent upsert; they stay apart so that a
//! change stream can tell them apart.
//!
//! Why the column count: ALTER TABLE only appends columns, so the columns
//! of an older table version are a prefix of the current ones, and a record
//! written before an alter is read with the layout of that prefix and
//! converted (the added columns get their default or NULL) without any
//! other record of the old definition (`docs/recovery.md`, "Across ALTER
//! TABLE"). Version 1 records (20-byte header, no count) are refused.
//!
//! [`RedoSink`] is where a commit puts its records: the redo log part
//! ([`RedoLog`]), or a `Vec` in tests.

use crate::redo::{RedoError, RedoLog, REDO_RECORD_HEADER_BYTES, REDO_RECORD_PAYLOAD_MAX_BYTES};
use crate::Gci;
use schema::{KEY_BYTES_MAX, ROW_BYTES_MAX};

/// Format version of LDM records.
pub const REDO_RECORD_VERSION: u8 = 2;
/// Bytes before the key in an LDM record.
pub const REDO_RECORD_FIXED_HEADER_BYTES: usize = 22;
/// Largest LDM record: the header, the longest key and the largest row.
pub const REDO_RECORD_BYTES_MAX: usize =
    REDO_RECORD_FIXED_HEADER_BYTES + KEY_BYTES_MAX + ROW_BYTES_MAX;

// Every record fits one redo log record, and every length fits its u16.
const _: () = assert!(REDO_RECORD_BYTES_MAX <= REDO_RECORD_PAYLOAD_MAX_BYTES);
const _: () = assert!(KEY_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(ROW_BYTES_MAX <= u16::MAX as usize);

/// Room a commit's check leaves for the redo log's own GCI-complete and
/// restart markers. The log keeps a smaller reserve itself (160 bytes);
/// this is a generous bound so that a check that passes here implies that
/// every append passes there.
const REDO_MARKER_MARGIN_BYTES: u64 = 1024;
/// Alignment of records in the redo log (an upper bound for the padding).
const REDO_LOG_ALIGN_BYTES: u64 = 8;

/// What a change did to its row.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RedoKind {
    Insert,
    Update,
    Delete,
}

impl RedoKind {
    fn code(self) -> u8 {
        match self {
            RedoKind::Insert => 1,
            RedoKind::Update => 2,
            RedoKind::Delete => 3,
        }
    }

    fn from_code(code: u8) -> Option<RedoKind> {
        match code {
            1 => Some(RedoKind::Insert),
            2 => Some(RedoKind::Update),
            3 => Some(RedoKind::Delete),
            _ => None,
        }
    }
}

/// One decoded LDM record, borrowing the bytes it was read from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RedoRecord<'a> {
    pub kind: RedoKind,
    pub table_id: u32,
    pub table_version: u32,
    pub fragment_id: u32,
    /// Columns of the table at `table_version`: the image's layout is the
    /// layout of the table's first `columns` columns.
    pub columns: u16,
    /// The primary key, memcomparable.
    pub key: &'a [u8],
    /// The new image (empty for a delete).
    pub fixed: &'a [u8],
    pub var: &'a [u8],
}

/// Why bytes are not an LDM record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedoRecordError {
    #[error("LDM redo record of {bytes} bytes is shorter than its {REDO_RECORD_FIXED_HEADER_BYTES}-byte header")]
    Short { bytes: usize },
    #[error("LDM redo record has format version {version}, this node reads {REDO_RECORD_VERSION}")]
    Version { version: u8 },
    #[error("LDM redo record has unknown kind {kind}")]
    Kind { kind: u8 },
    #[error("LDM redo record of {bytes} bytes: its lengths (key {key}, fixed {fixed}, var {var}) say {expected}")]
    Length {
        bytes: usize,
        key: usize,
        fixed: usize,
        var: usize,
        expected: usize,
    },
    #[error("LDM redo delete record carries a row image")]
    DeleteWithImage,
    #[error("LDM redo record has an empty primary key")]
    EmptyKey,
}

impl<'a> RedoRecord<'a> {
    /// Appends the record's bytes to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        debug_assert!(
            self.kind != RedoKind::Delete || self.fixed.is_empty() && self.var.is_empty()
        );
        let start = out.len();
        push_header(
            out,
            self.kind,
            self.table_id,
            self.table_version,
            self.fragment_id,
            self.columns,
        );
        out.extend_from_slice(self.key);
        out.extend_from_slice(self.fixed);
        out.extend_from_slice(self.var);
        finish(out, start, self.key.len(), self.fixed.len(), self.var.len());
    }

    /// Reads a record, checking its version, kind and lengths (the bytes
    /// come from disk). The row image itself is checked by the replaying
    /// fragment against its layout.
    pub fn decode(bytes: &'a [u8]) -> Result<RedoRecord<'a>, RedoRecordError> {
        if bytes.len() < REDO_RECORD_FIXED_HEADER_BYTES {
            return Err(RedoRecordError::Short { bytes: bytes.len() });
        }
        if bytes[0] != REDO_RECORD_VERSION {
            return Err(RedoRecordError::Version { version: bytes[0] });
        }
        let kind = RedoKind::from_code(bytes[1]).ok_or(RedoRecordError::Kind { kind: bytes[1] })?;
        let u16_at = |at: usize| usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let (key, fixed, var) = (u16_at(2), u16_at(16), u16_at(18));
        let expected = REDO_RECORD_FIXED_HEADER_BYTES + key + fixed + var;
        if expected != bytes.len() {
            return Err(RedoRecordError::Length {
                bytes: bytes.len(),
                key,
                fixed,
                var,
                expected,
            });
        }
        if key == 0 {
            return Err(RedoRecordError::EmptyKey);
        }
        if kind == RedoKind::Delete && fixed + var != 0 {
            return Err(RedoRecordError::DeleteWithImage);
        }
        let body = &bytes[REDO_RECORD_FIXED_HEADER_BYTES..];
        let (key_bytes, rest) = body.split_at(key);
        let (fixed_bytes, var_bytes) = rest.split_at(fixed);
        Ok(RedoRecord {
            kind,
            table_id: u32_at(4),
            table_version: u32_at(8),
            fragment_id: u32_at(12),
            columns: u16::from_le_bytes([bytes[20], bytes[21]]),
            key: key_bytes,
            fixed: fixed_bytes,
            var: var_bytes,
        })
    }
}

/// Appends a header whose lengths [`finish`] fills in once the key and
/// image behind it are written (the key is encoded straight into `out`).
pub(super) fn push_header(
    out: &mut Vec<u8>,
    kind: RedoKind,
    table_id: u32,
    table_version: u32,
    fragment_id: u32,
    columns: u16,
) {
    // Built whole and appended in one call: a push per field cost a
    // capacity check each, on every commit.
    let mut header = [0u8; REDO_RECORD_FIXED_HEADER_BYTES];
    header[0] = REDO_RECORD_VERSION;
    header[1] = kind.code();
    header[4..8].copy_from_slice(&table_id.to_le_bytes());
    header[8..12].copy_from_slice(&table_version.to_le_bytes());
    header[12..16].copy_from_slice(&fragment_id.to_le_bytes());
    header[20..22].copy_from_slice(&columns.to_le_bytes());
    out.extend_from_slice(&header);
}

/// Writes the lengths into the header of the record that starts at
/// `start` and runs to the end of `out`.
pub(super) fn finish(out: &mut [u8], start: usize, key: usize, fixed: usize, var: usize) {
    assert_eq!(
        out.len() - start,
        REDO_RECORD_FIXED_HEADER_BYTES + key + fixed + var,
        "LDM redo record lengths"
    );
    assert!(
        key <= KEY_BYTES_MAX && fixed + var <= ROW_BYTES_MAX,
        "LDM redo record: key of {key} bytes, row of {} bytes",
        fixed + var
    );
    let header = &mut out[start..start + REDO_RECORD_FIXED_HEADER_BYTES];
    header[2..4].copy_from_slice(&(key as u16).to_le_bytes());
    header[16..18].copy_from_slice(&(fixed as u16).to_le_bytes());
    header[18..20].copy_from_slice(&(var as u16).to_le_bytes());
}

/// What one commit is about to append: checked against the sink before
/// anything is appended or installed.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RedoNeed {
    pub records: usize,
    /// Sum of the records' lengths.
    pub payload_bytes: usize,
    /// The longest record.
    pub largest_payload_bytes: usize,
}

impl RedoNeed {
    pub(super) fn add(&mut self, bytes: usize) {
        self.records += 1;
        self.payload_bytes += bytes;
        self.largest_payload_bytes = self.largest_payload_bytes.max(bytes);
    }
}

/// Where a commit's redo records go.
///
/// A commit must not stop half-way for lack of log space, so it asks
/// [`RedoSink::check_room`] for all its records first and returns
/// `RedoFull` before it appends or installs anything; a sink whose
/// `check_room` passes must then take every one of those appends unless
/// the log itself fails (an I/O error, which is not a full log).
pub trait RedoSink {
    /// Whether `need` fits now; `RedoError::Full` if not.
    fn check_room(&self, need: RedoNeed) -> Result<(), RedoError>;
    /// Appends one record of `gci`.
    fn append(&mut self, gci: Gci, record: &[u8]) -> Result<(), RedoError>;
}

impl RedoSink for RedoLog {
    /// A conservative bound from the log's public figures: every record
    /// takes its header and padding, a record that does not fit in what is
    /// left of a file first skips that remainder (less than the record, at
    /// most once per file), and the log keeps room for its markers.
    fn check_room(&self, need: RedoNeed) -> Result<(), RedoError> {
        if need.records == 0 {
            return Ok(());
        }
        let per_record = REDO_RECORD_HEADER_BYTES as u64 + REDO_LOG_ALIGN_BYTES;
        let records = need.records as u64;
        let largest = need.largest_payload_bytes as u64 + per_record;
        let skips = records.min(u64::from(self.config().files) + 1);
        let bound = need.payload_bytes as u64
            + records * per_record
            + skips * largest
            + REDO_MARKER_MARGIN_BYTES;
        let free = self.capacity_bytes() - self.used_bytes();
        if bound > free {
            return Err(RedoError::Full {
                part: self.config().part,
                used_bytes: self.used_bytes(),
                capacity_bytes: self.capacity_bytes(),
            });
        }
        Ok(())
    }

    fn append(&mut self, gci: Gci, record: &[u8]) -> Result<(), RedoError> {
        RedoLog::append(self, gci, record).map(|_| ())
    }
}

/// A sink for tests: every record, with its GCI, in order. Never full.
impl RedoSink for Vec<(Gci, Vec<u8>)> {
    fn check_room(&self, _need: RedoNeed) -> Result<(), RedoError> {
        Ok(())
    }

    fn append(&mut self, gci: Gci, record: &[u8]) -> Result<(), RedoError> {
        self.push((gci, record.to_vec()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_bytes_are_refused() {
        let record = RedoRecord {
            kind: RedoKind::Update,
            table_id: 7,
            table_version: 3,
            fragment_id: 2,
            columns: 4,
            key: &[1, 2, 3],
            fixed: &[9; 10],
            var: &[4, 0, 5, 6, 7, 8],
        };
        let mut bytes = vec![0xEE];
        record.encode_into(&mut bytes);
        let bytes = &bytes[1..];
        assert_eq!(bytes.len(), REDO_RECORD_FIXED_HEADER_BYTES + 3 + 10 + 6);
        assert_eq!(&bytes[..4], &[2, 2, 3, 0]);
        assert_eq!(&bytes[20..22], &[4, 0]);
        assert_eq!(RedoRecord::decode(bytes), Ok(record));
        assert_eq!(
            RedoRecord::decode(&bytes[..bytes.len() - 1]),
            Err(RedoRecordError::Length {
                bytes: bytes.len() - 1,
                key: 3,
                fixed: 10,
                var: 6,
                expected: bytes.len()
            })
        );
        assert_eq!(
            RedoRecord::decode(&bytes[..5]),
            Err(RedoRecordError::Short { bytes: 5 })
        );
        let mut bad = bytes.to_vec();
        bad[0] = 1;
        assert_eq!(
            RedoRecord::decode(&bad),
            Err(RedoRecordError::Version { version: 1 })
        );
        bad[0] = 2;
        bad[1] = 9;
        assert_eq!(
            RedoRecord::decode(&bad),
            Err(RedoRecordError::Kind { kind: 9 })
        );
        bad[1] = 3;
        assert_eq!(
            RedoRecord::decode(&bad),
            Err(RedoRecordError::DeleteWithImage)
        );
    }
}
