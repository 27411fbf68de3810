//! The sysfile: what a data node keeps on disk for a system restart (NDB:
//! DIH's sysfile, its `latestGCI_completed` and node states).
//!
//! A system restart must bring every node to one GCI that the cluster
//! completed; the redo logs alone cannot say which (a node may have flushed
//! a GCI another never did). So every node records, at each GCP, the GCI the
//! master declared complete and the nodes that were serving (held every
//! row) when it was saved; at a system restart the master takes the highest
//! GCI any node recorded (see `docs/recovery.md`, "System restart").
//!
//! It also keeps the cluster incarnation that completed the kept GCI: GCI
//! numbers above the restored one are handed out again after a system
//! restart, so a GCI alone does not say whether a commit survived
//! (docs/transactions.md, "Global checkpoints").
//!
//! Format (little endian, `SYSFILE_BYTES`): magic `SKSYSF01`, format
//! version (u32, 3), kept GCI (u32), incarnation (u32), serving nodes (the
//! 256-bit node bitmask, 4 × u64), CRC32C of everything before it (u32). Written whole to
//! `sysfile.tmp`, fsynced, renamed over `sysfile`, directory fsynced: after
//! a crash the file holds the old record or the new one, never a mix.
//!
//! The version also stands for the whole data directory's: version 3 came
//! with `utf8mb4_general_ci`'s MySQL weights (uppercase, accents dropped),
//! which changed the key bytes of such strings and so the partition of
//! their rows, the hash index, unique index rows and the keys in redo
//! records. A node whose sysfile is of version 1 or 2 holds rows placed by
//! the old keys, so it refuses to start (naming the version) rather than
//! misplace them; it needs an initial start.

use std::path::{Path, PathBuf};

use signal::NodeBitmask;
use storage::disk::{write_file_atomically, Disk, OpenMode};

const MAGIC: [u8; 8] = *b"SKSYSF01";
const VERSION: u32 = 3;
/// The file's size: magic, version, GCI, incarnation, bitmask, CRC.
pub const SYSFILE_BYTES: usize = 8 + 4 + 4 + 4 + 32 + 4;
/// Where the serving nodes' bitmask starts.
const SERVING_AT: usize = 20;
/// The last format version written before `utf8mb4_general_ci` keys took
/// MySQL's weights (format 2 has this one's layout, format 1 lacks the
/// incarnation); a sysfile of it or older is refused.
const VERSION_BEFORE_GENERAL_CI_WEIGHTS: u32 = 2;

/// What a node keeps.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// The newest GCI the master declared complete cluster-wide (0: none).
    pub gci: u32,
    /// The nodes serving when `gci` was saved.
    pub serving: NodeBitmask,
    /// The cluster incarnation that completed `gci` (0: none).
    pub incarnation: u32,
}

/// Where a node's sysfile lives, in its file system directory.
pub fn path(fs_dir: &Path) -> PathBuf {
    fs_dir.join("sysfile")
}

fn encode(kept: &Kept) -> [u8; SYSFILE_BYTES] {
    let mut out = [0u8; SYSFILE_BYTES];
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&kept.gci.to_le_bytes());
    out[16..20].copy_from_slice(&kept.incarnation.to_le_bytes());
    for (i, word) in kept.serving.0.iter().enumerate() {
        let at = SERVING_AT + 8 * i;
        out[at..at + 8].copy_from_slice(&word.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out[..SYSFILE_BYTES - 4]);
    out[SYSFILE_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8], at: &Path) -> Result<Kept, String> {
    let bad = |why: &str| format!("sysfile {} is damaged ({why})", at.display());
    let word =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    // An older format is named before its size is judged (format 1 is
    // shorter).
    if bytes.len() >= 12 && bytes[0..8] == MAGIC && word(8) <= VERSION_BEFORE_GENERAL_CI_WEIGHTS {
        return Err(format!(
            "sysfile {}: format version {}, this build reads version {VERSION} only: the data \
             directory was written by a build whose utf8mb4_general_ci keys (lowercase) \
             place and index rows differently from this build's (MySQL's weights); start \
             the node with --initial (its data is lost) or use the older build",
            at.display(),
            word(8)
        ));
    }
    if bytes.len() != SYSFILE_BYTES {
        return Err(bad(&format!(
            "{} bytes, expected {SYSFILE_BYTES}",
            bytes.len()
        )));
    }
    let crc = u32::from_le_bytes(
        bytes[SYSFILE_BYTES - 4..]
            .try_into()
            .map_err(|_| bad("crc"))?,
    );
    if crc32c::crc32c(&bytes[..SYSFILE_BYTES - 4]) != crc {
        return Err(bad("checksum mismatch"));
    }
    if bytes[0..8] != MAGIC {
        return Err(bad("not a sysfile"));
    }
    if word(8) != VERSION {
        return Err(bad(&format!("format version {}", word(8))));
    }
    let mut serving = NodeBitmask::new();
    for (i, slot) in serving.0.iter_mut().enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[SERVING_AT + 8 * i..SERVING_AT + 8 + 8 * i]);
        *slot = u64::from_le_bytes(w);
    }
    Ok(Kept {
        gci: word(12),
        serving,
        incarnation: word(16),
    })
}

/// Reads the sysfile of `fs_dir`; a missing one is a node that never kept
/// a GCI (`Kept::default()`). A damaged one is refused: the file is only
/// ever replaced whole, so damage is not a torn write.
pub fn read(disk: &dyn Disk, fs_dir: &Path) -> Result<Kept, String> {
    let at = path(fs_dir);
    let exists = disk
        .exists(&at)
        .map_err(|e| format!("cannot look for sysfile {}: {e}", at.display()))?;
    if !exists {
        return Ok(Kept::default());
    }
    let file = disk
        .open(&at, OpenMode::ReadOnly)
        .map_err(|e| format!("cannot open sysfile {}: {e}", at.display()))?;
    let mut bytes = [0u8; SYSFILE_BYTES + 1];
    let read = file
        .read_full_at(0, &mut bytes)
        .map_err(|e| format!("cannot read sysfile {}: {e}", at.display()))?;
    decode(&bytes[..read], &at)
}

/// Replaces the sysfile of `fs_dir` with `kept`, durably.
pub fn write(disk: &dyn Disk, fs_dir: &Path, kept: &Kept) -> Result<(), String> {
    disk.create_dir_all(fs_dir)
        .map_err(|e| format!("cannot create {}: {e}", fs_dir.display()))?;
    let at = path(fs_dir);
    write_file_atomically(disk, &fs_dir.join("sysfile.tmp"), &at, &encode(kept)).map_err(|e| {
        format!(
            "cannot write sysfile {} (GCI {}): {} {}: {}",
            at.display(),
            kept.gci,
            e.step,
            e.path.display(),
            e.source
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::NodeId;
    use storage::disk::SimDisk;

    #[test]
    fn a_sysfile_survives_crashes_whole_and_damage_is_refused() {
        let disk = SimDisk::new(5);
        let dir = Path::new("/data/ndb_2_fs");
        assert_eq!(read(&disk, dir).unwrap(), Kept::default());
        let serving: NodeBitmask = [NodeId::new(2).unwrap(), NodeId::new(200).unwrap()]
            .into_iter()
            .collect();
        let kept = Kept {
            gci: 57,
            serving,
            incarnation: 0x5eed_0001,
        };
        write(&disk, dir, &kept).unwrap();
        disk.crash();
        assert_eq!(read(&disk, dir).unwrap(), kept);
        // An unsynced rewrite: the old record or the new one, never a mix.
        for gci in 58..70 {
            let next = Kept {
                gci,
                serving,
                incarnation: 0x5eed_0002,
            };
            let mut file = disk
                .open(&dir.join("sysfile.tmp"), OpenMode::CreateTruncate)
                .unwrap();
            file.write_at(0, &encode(&next)).unwrap();
            drop(file);
            disk.crash();
            assert_eq!(read(&disk, dir).unwrap().gci, 57);
        }
        disk.flip_byte(&path(dir), 13).unwrap();
        let error = read(&disk, dir).unwrap_err();
        assert!(error.contains("checksum mismatch"), "{error}");
    }

    /// A sysfile of format 1 or 2 (before general_ci's MySQL weights) is
    /// refused with its version named: its node's rows are placed by the
    /// old string keys.
    #[test]
    fn a_sysfile_of_format_1_or_2_is_refused() {
        let disk = SimDisk::new(6);
        let dir = Path::new("/data/ndb_3_fs");
        let serving: NodeBitmask = [NodeId::new(3).unwrap()].into_iter().collect();
        for version in [1u32, 2] {
            let mut old = Vec::with_capacity(SYSFILE_BYTES);
            old.extend_from_slice(&MAGIC);
            old.extend_from_slice(&version.to_le_bytes());
            old.extend_from_slice(&41u32.to_le_bytes());
            if version == 2 {
                old.extend_from_slice(&7u32.to_le_bytes());
            }
            for word in serving.0 {
                old.extend_from_slice(&word.to_le_bytes());
            }
            let crc = crc32c::crc32c(&old);
            old.extend_from_slice(&crc.to_le_bytes());
            disk.create_dir_all(dir).unwrap();
            let mut file = disk.open(&path(dir), OpenMode::CreateTruncate).unwrap();
            file.write_at(0, &old).unwrap();
            file.sync().unwrap();
            drop(file);
            let error = read(&disk, dir).unwrap_err();
            assert!(
                error.contains(&format!(
                    "format version {version}, this build reads version 3"
                )),
                "{error}"
            );
            assert!(error.contains("--initial"), "{error}");
        }
    }
}
