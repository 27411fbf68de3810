//! Online backup and restore (issue 23 items 1 and 2; docs/operations.md).
//!
//! The backup is coordinated by the `skarv admin backup` process, an API
//! node; each data node writes its share (the data node's `ldm::backup`).
//! Every LDM instance starts a log of the committed changes of the
//! backed-up tables in the fragments its node is the primary of
//! (`BackupLogReq`); then each fragment's primary writes its committed
//! rows to its own data file (`BackupFragReq`); then the process commits
//! one row to [`MARKER_TABLE`]: its epoch T is at least the epoch of
//! every commit the scans saw (a TC hands out an epoch only after every
//! TC prepared it, docs/transactions.md "Global checkpoints"); then every
//! log completes once T is complete on its node. Restore loads the rows
//! and replays the logs' last image of each row up to T: the result is
//! the committed state at T, exactly (docs/operations.md says why).
//! "Every table" includes the hidden parts table of each BLOB/TEXT
//! column, backed up row by row like the others (the base rows hold
//! heads): a value's head and parts are one transaction's writes, so
//! both are at T.

pub mod format;
pub mod restore;
pub mod take;

use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

/// The native table the backup commits its stop marker to (NDB's backup
/// takes its id from `SYSTAB_0` the same way). It is never backed up.
pub const MARKER_TABLE: &str = "skarv_backup_marker";
/// The status file a running backup rewrites (`backup-status` reads it).
pub const STATUS_FILE: &str = "status.json";
/// A file whose presence asks the running backup to stop (`abort-backup`).
pub const ABORT_FILE: &str = "abort";
/// A backup's directory name prefix (NDB's `BACKUP-<id>`).
pub const DIR_PREFIX: &str = "BACKUP-";

/// `BACKUP-<id>` under `dir`.
pub fn backup_dir(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{DIR_PREFIX}{id}"))
}

/// The ids of the backups under `dir`, ascending.
pub fn backup_ids(dir: &Path) -> Result<Vec<u64>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("read {}: {e}", dir.display())),
    };
    let mut ids: Vec<u64> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix(DIR_PREFIX)?
                .parse()
                .ok()
        })
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// The dictionary's name of `db.t` (`db/def/t`); a name without a dot is
/// already one.
pub fn cluster_name(name: &str) -> String {
    match name.split_once('.') {
        Some((db, table)) => format!("{db}/def/{table}"),
        None => name.to_owned(),
    }
}

/// Writes `status.json` of a backup (replaced whole by a rename, so a
/// reader never sees half of it).
pub fn write_status(dir: &Path, status: &Json) -> Result<(), String> {
    let temp = dir.join(format!("{STATUS_FILE}.tmp"));
    let text = serde_json::to_vec_pretty(status).map_err(|e| e.to_string())?;
    std::fs::write(&temp, text).map_err(|e| format!("write {}: {e}", temp.display()))?;
    std::fs::rename(&temp, dir.join(STATUS_FILE))
        .map_err(|e| format!("rename {}: {e}", temp.display()))
}

/// What `backup-status` says of the backup in `dir`: complete (the
/// manifest is there and checks), or what its status file says.
pub fn describe(dir: &Path, id: u64) -> Json {
    match format::read_manifest(dir) {
        Ok(manifest) => json!({
            "id": id,
            "state": "complete",
            "stop_epoch": manifest["stop_epoch_text"],
            "rows": manifest["rows"],
            "log_records": manifest["log"]["records"],
            "bytes": manifest["bytes"],
        }),
        Err(manifest_error) => {
            let status = std::fs::read(dir.join(STATUS_FILE))
                .ok()
                .and_then(|text| serde_json::from_slice::<Json>(&text).ok());
            match status {
                Some(mut status) => {
                    // A backup whose process is gone without saying how it
                    // ended did not complete.
                    let running = status["state"] == "running";
                    let alive = status["pid"]
                        .as_u64()
                        .and_then(|pid| i32::try_from(pid).ok())
                        // SAFETY: signal 0 only asks whether the pid exists.
                        .is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
                    if running && !alive {
                        status["state"] = json!("failed");
                        status["error"] = json!("the backup process ended without a manifest");
                    }
                    if status["state"] != "running" && status["error"].is_null() {
                        status["error"] = json!(manifest_error);
                    }
                    status
                }
                None => json!({"id": id, "state": "failed", "error": manifest_error}),
            }
        }
    }
}
