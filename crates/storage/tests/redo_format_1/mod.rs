//! A writer of redo log parts in format version 1, the format of older
//! builds, for the tests that a part of that format is recovered and
//! continued. It works from the layout in `docs/redo-format.md`, not from
//! the code under test: it rewrites a closed part that this build wrote
//! (format 2) as a build of format 1 would have written it: control file
//! and ring file headers of version 1, and every record of the live log
//! with the magic `SKRL`, the CRC of the header before its CRC field and
//! then of the payload, and chain links to those CRCs.

#![allow(dead_code)] // each test crate that includes it uses a part

use storage::disk::{Disk, DiskFile, OpenMode};
use storage::redo::{Lsn, RedoConfig, REDO_FILE_HEADER_BYTES, REDO_RECORD_HEADER_BYTES};

const CONTROL_BYTES: usize = 44;
const FILE_HEADER_BYTES: usize = 36;
const RECORD_ALIGN_BYTES: u64 = 8;
const KIND_PAD: u8 = 4;

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

fn read(file: &dyn DiskFile, offset: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    assert_eq!(file.read_full_at(offset, &mut bytes).unwrap(), len);
    bytes
}

/// Sets the version field (bytes 8..12) of a control file or ring file
/// header and its CRC (of the bytes before the CRC at `crc_at`).
pub fn set_version(disk: &dyn Disk, path: &std::path::Path, version: u32, crc_at: usize) {
    let mut file = disk.open(path, OpenMode::Existing).unwrap();
    let mut bytes = read(file.as_ref(), 0, crc_at + 4);
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..crc_at]);
    bytes[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    file.write_at(0, &bytes).unwrap();
    file.sync().unwrap();
}

/// The control file's version and CRC offset, for [`set_version`].
pub fn set_control_version(disk: &dyn Disk, config: &RedoConfig, version: u32) {
    set_version(disk, &config.control_path(), version, CONTROL_BYTES - 4);
}

/// The format version in the control file.
pub fn control_version(disk: &dyn Disk, config: &RedoConfig) -> u32 {
    let file = disk
        .open(&config.control_path(), OpenMode::ReadOnly)
        .unwrap();
    le_u32(&read(file.as_ref(), 0, CONTROL_BYTES), 8)
}

/// The magic of the record at `lsn`.
pub fn magic_at(disk: &dyn Disk, config: &RedoConfig, lsn: Lsn) -> [u8; 4] {
    let (file, offset) = config.locate(lsn);
    let file = disk
        .open(&config.file_path(file), OpenMode::ReadOnly)
        .unwrap();
    read(file.as_ref(), offset, 4).try_into().unwrap()
}

/// Rewrites the closed part of `config` (format 2) in format 1: its
/// records from the tail to the end of the live log and, when `headers`,
/// its control file and ring file headers. Returns the records rewritten
/// (pads included). The files are synced.
pub fn rewrite_as_format_1(disk: &dyn Disk, config: &RedoConfig, headers: bool) -> usize {
    let control = disk
        .open(&config.control_path(), OpenMode::ReadOnly)
        .unwrap();
    let control = read(control.as_ref(), 0, CONTROL_BYTES);
    assert_eq!(&control[0..8], b"SKARVRCF");
    assert_eq!(le_u32(&control, 8), 2, "a part this build wrote");
    let tail = le_u64(&control, 32);
    let mut files: Vec<Box<dyn DiskFile>> = (0..config.files)
        .map(|i| disk.open(&config.file_path(i), OpenMode::Existing).unwrap())
        .collect();
    let data_per_file = config.file_size_bytes - REDO_FILE_HEADER_BYTES;
    let end = tail + config.capacity_bytes();
    let (mut lsn, mut rewritten) = (tail, 0);
    // The CRC of the previous record as it was (format 2) and as it is now.
    let mut previous: Option<(u32, u32)> = None;
    while lsn < end {
        let (file, offset) = config.locate(Lsn(lsn));
        let remaining = data_per_file - (offset - REDO_FILE_HEADER_BYTES);
        if remaining < REDO_RECORD_HEADER_BYTES as u64 {
            lsn += remaining;
            continue;
        }
        let file = &mut files[file as usize];
        let header = read(file.as_ref(), offset, REDO_RECORD_HEADER_BYTES);
        if &header[0..4] != b"SKR2" || le_u64(&header, 16) != lsn {
            break;
        }
        let len = le_u32(&header, 8) as usize;
        let mut record = read(file.as_ref(), offset, REDO_RECORD_HEADER_BYTES + len);
        let old_crc = le_u32(&record, 28);
        let check = {
            let head = crc32c::crc32c_append(crc32c::crc32c(&record[..28]), &[0; 4]);
            crc32c::crc32c_append(head, &record[32..])
        };
        let linked = previous.is_none_or(|(old, _)| le_u32(&record, 24) == old);
        if check != old_crc || !linked {
            break;
        }
        record[0..4].copy_from_slice(b"SKRL");
        if let Some((_, new)) = previous {
            record[24..28].copy_from_slice(&new.to_le_bytes());
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&record[..28]), &record[32..]);
        record[28..32].copy_from_slice(&crc.to_le_bytes());
        file.write_at(offset, &record).unwrap();
        previous = Some((old_crc, crc));
        rewritten += 1;
        lsn += if header[4] == KIND_PAD {
            remaining
        } else {
            (REDO_RECORD_HEADER_BYTES + len).div_ceil(RECORD_ALIGN_BYTES as usize) as u64
                * RECORD_ALIGN_BYTES
        };
    }
    for file in &mut files {
        file.sync().unwrap();
    }
    drop(files);
    if headers {
        for i in 0..config.files {
            set_version(disk, &config.file_path(i), 1, FILE_HEADER_BYTES - 4);
        }
        set_control_version(disk, config, 1);
    }
    rewritten
}
