//! The block file of an online backup (docs/operations.md, "Files"): the
//! framing shared by the data nodes, which write their fragments' rows,
//! and the backup and restore processes, which write the log and read
//! everything back.
//!
//! A block file is the 8-byte magic, then blocks: `u32` payload length,
//! `u32` crc32c of the payload (both little-endian), the payload. A payload
//! is whole records; a record never spans two blocks. A data file's record
//! is a row image: `u32` fixed length, `u32` var length, the two parts. A
//! log file's record is `u64` epoch, `u32` table, `u32` kind
//! ([`LOG_WRITE`], [`LOG_DELETE`]), then a row image.

/// The first bytes of every data and log file (version 1 of the format).
pub const BLOCK_FILE_MAGIC: &[u8; 8] = b"SKARVBK1";
/// Bytes of a block's header: its payload's length and checksum.
pub const BLOCK_HEADER_BYTES: usize = 8;
/// A block is written once its payload reaches this: large enough that the
/// 8-byte block header and the checksum cost nothing, small enough that a
/// damaged byte names a small region.
pub const BLOCK_TARGET_BYTES: usize = 64 * 1024;
/// The largest payload a reader accepts: a target-sized block plus one
/// record of the largest row (two images' worth of a 30 KB row, rounded
/// up). A length above it is damage, not a block.
pub const BLOCK_BYTES_MAX: usize = BLOCK_TARGET_BYTES + 256 * 1024;

/// The header of a block whose payload is `payload`.
pub fn block_header(payload: &[u8]) -> [u8; BLOCK_HEADER_BYTES] {
    assert!(
        !payload.is_empty() && payload.len() <= BLOCK_BYTES_MAX,
        "a block of {} bytes: 1..={BLOCK_BYTES_MAX} allowed",
        payload.len()
    );
    let mut header = [0u8; BLOCK_HEADER_BYTES];
    header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[4..].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    header
}

/// Appends a row image record.
pub fn put_image(out: &mut Vec<u8>, fixed: &[u8], var: &[u8]) {
    out.extend_from_slice(&(fixed.len() as u32).to_le_bytes());
    out.extend_from_slice(&(var.len() as u32).to_le_bytes());
    out.extend_from_slice(fixed);
    out.extend_from_slice(var);
}

/// A log record's kind: a write's after image (insert or update).
pub const LOG_WRITE: u32 = 0;
/// A log record's kind: a delete's before image.
pub const LOG_DELETE: u32 = 1;
