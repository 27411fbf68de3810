//! The bytes of local checkpoint files: the data file's header and records,
//! and the control file. `docs/checkpoint-format.md` draws the same layout;
//! the two change together. Everything is little-endian; every checksum is
//! CRC32C.
//!
//! This module only encodes and decodes; deciding what is damaged and what
//! is merely incomplete is the reader's job (`restore`).

use crate::redo::Lsn;
use crate::Gci;

use super::CheckpointKind;

/// Version 2: page records carry the bitmap of the page's live slots and
/// only the rows a partial LCP wrote (version 1 wrote whole pages).
pub(super) const FORMAT_VERSION: u32 = 2;
pub(super) const DATA_MAGIC: [u8; 8] = *b"SKARVLCP";
pub(super) const CONTROL_MAGIC: [u8; 8] = *b"SKARVLCC";

/// Bytes of the data file header.
pub(super) const DATA_HEADER_BYTES: usize = 64;
/// Bytes of a record header; the record's CRC follows its body.
pub(super) const RECORD_HEADER_BYTES: usize = 16;
/// Bytes of the CRC at the end of each record.
pub(super) const RECORD_CRC_BYTES: usize = 4;
/// Bytes before each row's fixed part in a page record: slot and
/// variable-part length, both `u16`.
pub(super) const ROW_HEADER_BYTES: usize = 4;
/// Bytes of the bitmap of live slots at the start of a page record's
/// body: one bit per slot, slot `s` in bit `s % 8` of byte `s / 8`.
pub(super) fn bitmap_bytes(slots_per_page: u32) -> usize {
    (slots_per_page as usize).div_ceil(8)
}

/// Bytes of the trailer record's body.
pub(super) const TRAILER_BODY_BYTES: usize = 24;
/// Bytes of a control file.
pub(super) const CONTROL_BYTES: usize = 96;

/// Record tags (byte 0 of a record header).
pub(super) const TAG_PAGE: u8 = 1;
pub(super) const TAG_PAGE_LIST: u8 = 2;
pub(super) const TAG_TRAILER: u8 = 3;

/// `previous_lcp_id` of a full LCP: it builds on nothing.
pub(super) const NO_PREVIOUS: u64 = u64::MAX;

const FLAG_WITH_VAR: u8 = 1;

pub(super) fn le_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

pub(super) fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

pub(super) fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn kind_byte(kind: CheckpointKind) -> u8 {
    match kind {
        CheckpointKind::Full => 1,
        CheckpointKind::Partial => 2,
    }
}

fn kind_from_byte(byte: u8) -> Option<CheckpointKind> {
    match byte {
        1 => Some(CheckpointKind::Full),
        2 => Some(CheckpointKind::Partial),
        _ => None,
    }
}

/// The row layout a checkpoint was taken with; restoring into a row store
/// with another layout is refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct RowLayout {
    pub fixed_bytes: u32,
    pub with_var: bool,
    pub slots_per_page: u32,
}

/// The data file header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct DataHeader {
    pub table_id: u32,
    pub table_version: u32,
    pub fragment_id: u32,
    pub lcp_id: u64,
    pub full_lcp_id: u64,
    pub kind: CheckpointKind,
    pub layout: RowLayout,
    /// Columns of the table at `table_version` (the rows' layout is that of
    /// the table's first `columns` columns, which lets a restore after an
    /// ALTER TABLE convert them); 0 when the writer was not told.
    pub columns: u16,
}

impl DataHeader {
    pub fn encode(&self) -> [u8; DATA_HEADER_BYTES] {
        let mut b = [0u8; DATA_HEADER_BYTES];
        b[0..8].copy_from_slice(&DATA_MAGIC);
        put_u32(&mut b, 8, FORMAT_VERSION);
        put_u32(&mut b, 12, self.table_id);
        put_u32(&mut b, 16, self.table_version);
        put_u32(&mut b, 20, self.fragment_id);
        put_u64(&mut b, 24, self.lcp_id);
        put_u64(&mut b, 32, self.full_lcp_id);
        b[40] = kind_byte(self.kind);
        b[41] = if self.layout.with_var {
            FLAG_WITH_VAR
        } else {
            0
        };
        b[42..44].copy_from_slice(&self.columns.to_le_bytes());
        put_u32(&mut b, 44, self.layout.fixed_bytes);
        put_u32(&mut b, 48, self.layout.slots_per_page);
        let crc = crc32c::crc32c(&b[..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    /// Decodes a header, or says what is wrong with it.
    pub fn decode(b: &[u8; DATA_HEADER_BYTES]) -> Result<DataHeader, String> {
        if b[0..8] != DATA_MAGIC {
            return Err("not a local checkpoint data file (bad magic)".to_string());
        }
        if crc32c::crc32c(&b[..60]) != le_u32(b, 60) {
            return Err("header checksum mismatch".to_string());
        }
        let version = le_u32(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "format version {version}, this build reads {FORMAT_VERSION}"
            ));
        }
        let kind = kind_from_byte(b[40]).ok_or_else(|| format!("unknown LCP kind {}", b[40]))?;
        Ok(DataHeader {
            table_id: le_u32(b, 12),
            table_version: le_u32(b, 16),
            fragment_id: le_u32(b, 20),
            lcp_id: le_u64(b, 24),
            full_lcp_id: le_u64(b, 32),
            kind,
            layout: RowLayout {
                fixed_bytes: le_u32(b, 44),
                with_var: b[41] & FLAG_WITH_VAR != 0,
                slots_per_page: le_u32(b, 48),
            },
            columns: le_u16(b, 42),
        })
    }
}

/// Writes a record header at `b[..RECORD_HEADER_BYTES]`.
pub(super) fn encode_record_header(b: &mut [u8], tag: u8, body_bytes: u32, a: u32, c: u32) {
    debug_assert!(b.len() >= RECORD_HEADER_BYTES);
    b[0] = tag;
    b[1..4].fill(0);
    put_u32(b, 4, body_bytes);
    put_u32(b, 8, a);
    put_u32(b, 12, c);
}

/// A decoded record header: tag, body bytes, and the two tag-specific
/// words (page record: page and rows; page list: count).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct RecordHeader {
    pub tag: u8,
    pub body_bytes: u32,
    pub a: u32,
    pub c: u32,
}

impl RecordHeader {
    pub fn decode(b: &[u8]) -> RecordHeader {
        RecordHeader {
            tag: b[0],
            body_bytes: le_u32(b, 4),
            a: le_u32(b, 8),
            c: le_u32(b, 12),
        }
    }

    /// Bytes of the whole record: header, body, CRC.
    pub fn record_bytes(&self) -> u64 {
        (RECORD_HEADER_BYTES + RECORD_CRC_BYTES) as u64 + u64::from(self.body_bytes)
    }
}

/// The trailer record's body.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Trailer {
    pub page_records: u32,
    pub pages_in_list: u32,
    pub rows: u64,
    pub page_list_offset: u64,
}

impl Trailer {
    pub fn encode(&self) -> [u8; TRAILER_BODY_BYTES] {
        let mut b = [0u8; TRAILER_BODY_BYTES];
        put_u32(&mut b, 0, self.page_records);
        put_u32(&mut b, 4, self.pages_in_list);
        put_u64(&mut b, 8, self.rows);
        put_u64(&mut b, 16, self.page_list_offset);
        b
    }

    pub fn decode(b: &[u8]) -> Trailer {
        Trailer {
            page_records: le_u32(b, 0),
            pages_in_list: le_u32(b, 4),
            rows: le_u64(b, 8),
            page_list_offset: le_u64(b, 16),
        }
    }
}

/// The control file of one LCP: its existence, whole and matching, is what
/// makes the LCP complete.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Control {
    pub kind: CheckpointKind,
    pub lcps_in_chain: u16,
    pub lcp_id: u64,
    pub full_lcp_id: u64,
    /// The LCP this one builds on; `NO_PREVIOUS` for a full one.
    pub previous_lcp_id: u64,
    pub redo_start: Lsn,
    pub max_gci: Gci,
    pub table_id: u32,
    pub table_version: u32,
    pub fragment_id: u32,
    pub data_bytes: u64,
    pub data_crc: u32,
    pub layout: RowLayout,
    pub page_list_offset: u64,
}

impl Control {
    pub fn encode(&self) -> [u8; CONTROL_BYTES] {
        let mut b = [0u8; CONTROL_BYTES];
        b[0..8].copy_from_slice(&CONTROL_MAGIC);
        put_u32(&mut b, 8, FORMAT_VERSION);
        b[12] = kind_byte(self.kind);
        b[13] = if self.layout.with_var {
            FLAG_WITH_VAR
        } else {
            0
        };
        b[14..16].copy_from_slice(&self.lcps_in_chain.to_le_bytes());
        put_u64(&mut b, 16, self.lcp_id);
        put_u64(&mut b, 24, self.full_lcp_id);
        put_u64(&mut b, 32, self.previous_lcp_id);
        put_u64(&mut b, 40, self.redo_start.0);
        put_u32(&mut b, 48, self.max_gci);
        put_u32(&mut b, 52, self.table_id);
        put_u32(&mut b, 56, self.table_version);
        put_u32(&mut b, 60, self.fragment_id);
        put_u64(&mut b, 64, self.data_bytes);
        put_u32(&mut b, 72, self.data_crc);
        put_u32(&mut b, 76, self.layout.fixed_bytes);
        put_u64(&mut b, 80, self.page_list_offset);
        put_u32(&mut b, 88, self.layout.slots_per_page);
        let crc = crc32c::crc32c(&b[..92]);
        put_u32(&mut b, 92, crc);
        b
    }

    /// Decodes a control file, or says why it is not a whole one (of this
    /// format version).
    pub fn decode(b: &[u8]) -> Result<Control, String> {
        if b.len() != CONTROL_BYTES {
            return Err(format!(
                "{} bytes, a control file has {CONTROL_BYTES}",
                b.len()
            ));
        }
        if b[0..8] != CONTROL_MAGIC || crc32c::crc32c(&b[..92]) != le_u32(b, 92) {
            return Err("bad magic or checksum".to_string());
        }
        let version = le_u32(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!(
                "format version {version}, this build reads {FORMAT_VERSION}"
            ));
        }
        let kind = kind_from_byte(b[12]).ok_or_else(|| format!("unknown LCP kind {}", b[12]))?;
        Ok(Control {
            kind,
            lcps_in_chain: le_u16(b, 14),
            lcp_id: le_u64(b, 16),
            full_lcp_id: le_u64(b, 24),
            previous_lcp_id: le_u64(b, 32),
            redo_start: Lsn(le_u64(b, 40)),
            max_gci: le_u32(b, 48),
            table_id: le_u32(b, 52),
            table_version: le_u32(b, 56),
            fragment_id: le_u32(b, 60),
            data_bytes: le_u64(b, 64),
            data_crc: le_u32(b, 72),
            layout: RowLayout {
                fixed_bytes: le_u32(b, 76),
                with_var: b[13] & FLAG_WITH_VAR != 0,
                slots_per_page: le_u32(b, 88),
            },
            page_list_offset: le_u64(b, 80),
        })
    }
}

/// The format version of a whole control file (right length, magic and
/// checksum, which every version keeps at the same place), whatever the
/// version; `None` when the bytes are not a whole control file.
pub(super) fn whole_control_version(b: &[u8]) -> Option<u32> {
    let whole = b.len() == CONTROL_BYTES
        && b[0..8] == CONTROL_MAGIC
        && crc32c::crc32c(&b[..92]) == le_u32(b, 92);
    whole.then(|| le_u32(b, 8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control() -> Control {
        Control {
            kind: CheckpointKind::Partial,
            lcps_in_chain: 3,
            lcp_id: 12,
            full_lcp_id: 10,
            previous_lcp_id: 11,
            redo_start: Lsn(4096),
            max_gci: 77,
            table_id: 5,
            table_version: 2,
            fragment_id: 1,
            data_bytes: 1234,
            data_crc: 0xDEAD_BEEF,
            layout: RowLayout {
                fixed_bytes: 104,
                with_var: true,
                slots_per_page: 303,
            },
            page_list_offset: 1000,
        }
    }

    #[test]
    fn control_round_trips_and_any_flipped_byte_is_caught() {
        let c = control();
        let bytes = c.encode();
        assert_eq!(Control::decode(&bytes), Ok(c));
        for at in 0..CONTROL_BYTES {
            let mut bad = bytes;
            bad[at] ^= 0x01;
            assert!(Control::decode(&bad).is_err(), "flip at {at} went unseen");
        }
        assert!(Control::decode(&bytes[..CONTROL_BYTES - 1]).is_err());
        assert_eq!(whole_control_version(&bytes), Some(FORMAT_VERSION));
        assert_eq!(whole_control_version(&bytes[..CONTROL_BYTES - 1]), None);
        let mut v1 = bytes;
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32c::crc32c(&v1[..92]);
        v1[92..96].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(whole_control_version(&v1), Some(1));
        assert!(Control::decode(&v1).is_err());
    }

    #[test]
    fn data_header_round_trips_and_any_flipped_byte_is_caught() {
        let h = DataHeader {
            table_id: 9,
            table_version: 3,
            fragment_id: 4,
            lcp_id: 8,
            full_lcp_id: 8,
            kind: CheckpointKind::Full,
            layout: RowLayout {
                fixed_bytes: 20,
                with_var: false,
                slots_per_page: 1560,
            },
            columns: 7,
        };
        let bytes = h.encode();
        assert_eq!(DataHeader::decode(&bytes), Ok(h));
        for at in 0..DATA_HEADER_BYTES {
            let mut bad = bytes;
            bad[at] ^= 0x80;
            assert!(
                DataHeader::decode(&bad).is_err(),
                "flip at {at} went unseen"
            );
        }
    }

    #[test]
    fn trailer_and_record_header_round_trip() {
        let t = Trailer {
            page_records: 7,
            pages_in_list: 9,
            rows: 1 << 40,
            page_list_offset: 99,
        };
        assert_eq!(Trailer::decode(&t.encode()), t);
        let mut b = [0u8; RECORD_HEADER_BYTES];
        encode_record_header(&mut b, TAG_PAGE, 300, 17, 4);
        let h = RecordHeader::decode(&b);
        assert_eq!((h.tag, h.body_bytes, h.a, h.c), (TAG_PAGE, 300, 17, 4));
        assert_eq!(h.record_bytes(), 320);
    }
}
