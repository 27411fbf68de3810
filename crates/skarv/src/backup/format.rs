//! The files of a backup (docs/operations.md, "Backup files"): block files
//! of checksummed records, which the data nodes write
//! (`storage::backup_file`) and restore reads here, and the manifest,
//! written last.
//!
//! A block file is the 8-byte magic, then blocks: `u32` payload length,
//! `u32` crc32c of the payload (both little-endian), the payload. A payload
//! is whole records; a record never spans two blocks. The reader checks
//! every block's length and checksum and, against the manifest, the file's
//! byte count, so a flipped byte or a cut file is refused with the file
//! and the offset named.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

pub use storage::backup_file::{
    BLOCK_BYTES_MAX, BLOCK_FILE_MAGIC, BLOCK_HEADER_BYTES, BLOCK_TARGET_BYTES,
};

/// The manifest's file name inside `BACKUP-<id>/`.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest ends with this line prefix and the crc32c (8 hex digits)
/// of everything before it.
pub const MANIFEST_CRC_PREFIX: &str = "crc32c ";
/// The manifest's format version: 2 adds the parts tables of BLOB/TEXT
/// columns (`blob_parts`), which a reader of 1 would leave out unsaid; 3
/// a table's data files (`files`: one per fragment, written by the data
/// node that was its primary) in place of its one `file`.
pub const MANIFEST_FORMAT: u64 = 3;
/// The oldest format this build reads (1: no BLOB/TEXT table in it).
pub const MANIFEST_FORMAT_OLDEST: u64 = 1;

/// Reads a block file, checking every block; yields payloads.
pub struct BlockReader {
    path: PathBuf,
    input: BufReader<File>,
    offset: u64,
    expected_bytes: u64,
    payload: Vec<u8>,
}

impl BlockReader {
    /// Opens `path`, which the manifest says holds `expected_bytes`.
    pub fn open(path: &Path, expected_bytes: u64) -> Result<BlockReader, String> {
        let file = File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?;
        let mut reader = BlockReader {
            path: path.to_owned(),
            input: BufReader::with_capacity(BLOCK_TARGET_BYTES * 2, file),
            offset: 0,
            expected_bytes,
            payload: Vec::with_capacity(BLOCK_TARGET_BYTES * 2),
        };
        let mut magic = [0u8; 8];
        let got = reader.read_up_to(&mut magic)?;
        if got < magic.len() || &magic != BLOCK_FILE_MAGIC {
            return Err(reader.damaged(0, "not a Skarv backup file (bad magic)"));
        }
        reader.offset = magic.len() as u64;
        Ok(reader)
    }

    fn damaged(&self, offset: u64, what: &str) -> String {
        format!(
            "backup file {} is damaged at offset {offset}: {what}",
            self.path.display()
        )
    }

    /// Reads as much of `buf` as the file holds.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.input.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read {}: {e}", self.path.display())),
            }
        }
        Ok(filled)
    }

    /// The next block's payload, checked; `None` at the end of the file
    /// (which must be where the manifest says).
    pub fn next_block(&mut self) -> Result<Option<&[u8]>, String> {
        let at = self.offset;
        let mut header = [0u8; BLOCK_HEADER_BYTES];
        let got = self.read_up_to(&mut header)?;
        if got == 0 {
            if at != self.expected_bytes {
                return Err(self.damaged(
                    at,
                    &format!(
                        "the file ends here but the manifest says {} bytes (truncated)",
                        self.expected_bytes
                    ),
                ));
            }
            return Ok(None);
        }
        if got < header.len() {
            return Err(self.damaged(at, "the file ends inside a block header (truncated)"));
        }
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        if len == 0 || len > BLOCK_BYTES_MAX {
            return Err(self.damaged(at, &format!("a block length of {len} bytes")));
        }
        let mut payload = std::mem::take(&mut self.payload);
        payload.resize(len, 0);
        let got = self.read_up_to(&mut payload)?;
        self.payload = payload;
        if got < len {
            return Err(self.damaged(at, "the file ends inside a block (truncated)"));
        }
        if crc32c::crc32c(&self.payload) != crc {
            return Err(self.damaged(at, "the block's checksum does not match"));
        }
        self.offset += (header.len() + len) as u64;
        if self.offset > self.expected_bytes {
            return Err(self.damaged(
                at,
                &format!(
                    "the file is longer than the manifest's {} bytes",
                    self.expected_bytes
                ),
            ));
        }
        Ok(Some(&self.payload))
    }

    /// Where the block last returned starts, for errors about its records.
    pub fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

/// Cuts a payload into records: each is `u32` fixed length, `u32` var
/// length, then (after a caller-known head) the two parts.
pub struct Records<'a> {
    bytes: &'a [u8],
}

impl<'a> Records<'a> {
    pub fn new(bytes: &'a [u8]) -> Records<'a> {
        Records { bytes }
    }

    /// Takes `n` bytes, or None when the payload is shorter (damage the
    /// block checksum did not catch: a writer's bug).
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// A row image: fixed part, var part.
    pub fn image(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        let fixed = self.u32()? as usize;
        let var = self.u32()? as usize;
        Some((self.take(fixed)?, self.take(var)?))
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Writes the manifest (JSON, then the checksum line) and fsyncs it and
/// the directory: the backup is complete once this returns.
pub fn write_manifest(dir: &Path, manifest: &Json) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(manifest)
        .map_err(|e| format!("cannot render the manifest: {e}"))?;
    text.push('\n');
    let crc = crc32c::crc32c(text.as_bytes());
    text.push_str(&format!("{MANIFEST_CRC_PREFIX}{crc:08x}\n"));
    let path = dir.join(MANIFEST_FILE);
    let temp = dir.join(format!("{MANIFEST_FILE}.tmp"));
    std::fs::write(&temp, text.as_bytes()).map_err(|e| format!("write {}: {e}", temp.display()))?;
    File::open(&temp)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("fsync {}: {e}", temp.display()))?;
    std::fs::rename(&temp, &path).map_err(|e| format!("rename to {}: {e}", path.display()))?;
    sync_dir(dir)
}

/// Fsyncs a directory, so the names of the files in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("fsync {}: {e}", dir.display()))
}

/// Reads and checks the manifest of the backup in `dir`.
pub fn read_manifest(dir: &Path) -> Result<Json, String> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&path).map_err(|e| {
        format!(
            "read {}: {e} (a backup without its manifest is incomplete)",
            path.display()
        )
    })?;
    let damaged = |offset: usize, what: &str| {
        format!(
            "backup file {} is damaged at offset {offset}: {what}",
            path.display()
        )
    };
    let body_end = text
        .windows(MANIFEST_CRC_PREFIX.len() + 1)
        .rposition(|w| w[0] == b'\n' && &w[1..] == MANIFEST_CRC_PREFIX.as_bytes())
        .map(|at| at + 1)
        .ok_or_else(|| damaged(text.len(), "no checksum line (truncated)"))?;
    let line = std::str::from_utf8(&text[body_end..])
        .map_err(|_| damaged(body_end, "the checksum line is not text"))?;
    let stored = line
        .trim_end()
        .strip_prefix(MANIFEST_CRC_PREFIX)
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .ok_or_else(|| damaged(body_end, "an unreadable checksum line"))?;
    if crc32c::crc32c(&text[..body_end]) != stored {
        return Err(damaged(0, "the manifest's checksum does not match"));
    }
    let manifest: Json = serde_json::from_slice(&text[..body_end])
        .map_err(|e| damaged(0, &format!("not JSON: {e}")))?;
    let readable = manifest["format"]
        .as_u64()
        .is_some_and(|f| (MANIFEST_FORMAT_OLDEST..=MANIFEST_FORMAT).contains(&f));
    if !readable {
        return Err(damaged(
            0,
            &format!(
                "format {} (this skarv reads {MANIFEST_FORMAT_OLDEST} to {MANIFEST_FORMAT})",
                manifest["format"]
            ),
        ));
    }
    Ok(manifest)
}

/// Lower-case hex of `bytes` (schemas in the manifest).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower-case hex text.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::backup_file::{block_header, put_image};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("skarv-bkfmt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A block file as the data nodes write one (`ldm::backup`).
    fn write_file(path: &Path, records: usize) -> u64 {
        let mut bytes = BLOCK_FILE_MAGIC.to_vec();
        let mut block = Vec::new();
        for i in 0..records {
            put_image(&mut block, &(i as u64).to_le_bytes(), &[7u8; 300]);
            if block.len() >= BLOCK_TARGET_BYTES || i + 1 == records {
                bytes.extend_from_slice(&block_header(&block));
                bytes.append(&mut block);
            }
        }
        std::fs::write(path, &bytes).unwrap();
        bytes.len() as u64
    }

    fn read_all(path: &Path, bytes: u64) -> Result<usize, String> {
        let mut r = BlockReader::open(path, bytes)?;
        let mut n = 0;
        while let Some(block) = r.next_block()? {
            let mut records = Records::new(block);
            while !records.is_empty() {
                records.image().unwrap();
                n += 1;
            }
        }
        Ok(n)
    }

    #[test]
    fn blocks_round_trip_and_damage_is_named() {
        let dir = scratch("round");
        let path = dir.join("t.data");
        let bytes = write_file(&path, 1000);
        assert_eq!(read_all(&path, bytes).unwrap(), 1000);

        let clean = std::fs::read(&path).unwrap();
        let mut flipped = clean.clone();
        flipped[70_000] ^= 0x10;
        std::fs::write(&path, &flipped).unwrap();
        let e = read_all(&path, bytes).unwrap_err();
        assert!(e.contains("t.data") && e.contains("checksum"), "{e}");

        std::fs::write(&path, &clean[..clean.len() - 5]).unwrap();
        let e = read_all(&path, bytes).unwrap_err();
        assert!(e.contains("t.data") && e.contains("truncated"), "{e}");

        // Cut at a block boundary: only the manifest's byte count tells.
        let first_block = 8 + 8 + u32::from_le_bytes(clean[8..12].try_into().unwrap()) as usize;
        std::fs::write(&path, &clean[..first_block]).unwrap();
        let e = read_all(&path, bytes).unwrap_err();
        assert!(
            e.contains(&format!("offset {first_block}")) && e.contains("truncated"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_manifest_is_checked() {
        let dir = scratch("manifest");
        let manifest = serde_json::json!({"format": MANIFEST_FORMAT, "id": 3});
        write_manifest(&dir, &manifest).unwrap();
        assert_eq!(read_manifest(&dir).unwrap(), manifest);
        let path = dir.join(MANIFEST_FILE);
        let mut text = std::fs::read(&path).unwrap();
        let at = text.iter().position(|b| *b == b'3').unwrap();
        text[at] = b'4';
        std::fs::write(&path, &text).unwrap();
        let e = read_manifest(&dir).unwrap_err();
        assert!(e.contains("manifest.json") && e.contains("checksum"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
