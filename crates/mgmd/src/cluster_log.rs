//! The cluster log: one file per management server where the events of the
//! whole cluster (nodes starting, stopping, failing, and what data nodes
//! report) are kept, in NDB's line format:
//!
//! ```text
//! 2026-11-21 15:30:00 [MgmtSrvr] INFO     -- Node 2: started
//! ```
//!
//! Times are UTC. Every line is written with one `write` call on a file
//! opened for appending, so lines are never torn by a crash of the process.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use signal::{DbinfoRow, NodeId, Severity};

/// Longer texts (from the network) are cut, so a line stays a line.
pub const EVENT_TEXT_MAX_BYTES: usize = 4096;
/// Events the mgmd keeps in memory for `skarv admin report eventlog`: the
/// latest this many since it started (the file keeps them all).
pub const RECENT_EVENTS_MAX: usize = 1_000;
/// What an admin names in a `DbinfoScanReq` to the mgmd for the recent
/// events, which the mgmd answers itself (no data node's ndbinfo table):
/// a row per event, `ints` its Unix time in seconds, `texts` its severity
/// (`INFO`, `WARNING`, `ALERT`) and its text.
pub const EVENTLOG: &str = "eventlog";

pub struct ClusterLog {
    path: PathBuf,
    file: File,
    /// The latest events as rows (see [`EVENTLOG`]), oldest first.
    recent: VecDeque<DbinfoRow>,
}

impl ClusterLog {
    /// The log file of management server `node` inside `data_dir`.
    pub fn path_in(data_dir: &Path, node: NodeId) -> PathBuf {
        data_dir.join(format!("ndb_{node}_cluster.log"))
    }

    pub fn open(path: PathBuf) -> io::Result<ClusterLog> {
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(ClusterLog {
            path,
            file,
            recent: VecDeque::with_capacity(RECENT_EVENTS_MAX),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The latest events (at most [`RECENT_EVENTS_MAX`]), oldest first.
    pub fn recent(&self) -> Vec<DbinfoRow> {
        self.recent.iter().cloned().collect()
    }

    /// Appends one line, and mirrors it to the process log.
    pub fn write(&mut self, severity: Severity, text: &str) -> io::Result<()> {
        let now = SystemTime::now();
        let line = format_line(now, severity, text);
        if self.recent.len() == RECENT_EVENTS_MAX {
            self.recent.pop_front();
        }
        self.recent.push_back(DbinfoRow {
            ints: vec![unix_seconds(now)],
            texts: vec![severity.as_str().to_owned(), clean_text(text)],
        });
        debug_assert!(self.recent.len() <= RECENT_EVENTS_MAX);
        match severity {
            Severity::Info => tracing::info!(target: "cluster_log", "{text}"),
            Severity::Warning => tracing::warn!(target: "cluster_log", "{text}"),
            Severity::Alert => tracing::error!(target: "cluster_log", "{text}"),
        }
        self.file.write_all(line.as_bytes())?;
        self.file.flush()
    }
}

/// One whole line, newline included. Control characters in `text` (it may
/// come from the network) become spaces so one event is one line.
pub fn format_line(time: SystemTime, severity: Severity, text: &str) -> String {
    format_event(unix_seconds(time), severity.as_str(), &clean_text(text))
}

/// The line of an event at `unix_seconds` (newline included), its text
/// already clean: what the file holds and `report eventlog` prints.
pub fn format_event(unix_seconds: u64, severity: &str, text: &str) -> String {
    format!(
        "{} [MgmtSrvr] {severity:<8} -- {text}\n",
        format_utc(unix_seconds)
    )
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// `text` with control characters as spaces, cut to
/// [`EVENT_TEXT_MAX_BYTES`].
fn clean_text(text: &str) -> String {
    let mut text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.len() > EVENT_TEXT_MAX_BYTES {
        let mut cut = EVENT_TEXT_MAX_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// `YYYY-MM-DD HH:MM:SS` of a Unix time in seconds, in UTC.
pub fn format_utc(unix_seconds: u64) -> String {
    let days = unix_seconds / 86_400;
    let second_of_day = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        second_of_day / 3600,
        (second_of_day / 60) % 60,
        second_of_day % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    assert!((1..=12).contains(&month) && (1..=31).contains(&day));
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_latest_events_are_kept_oldest_first() {
        let dir = std::env::temp_dir().join(format!("skarv-cluster-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut log = ClusterLog::open(dir.join("ndb_1_cluster.log")).unwrap();
        for i in 0..RECENT_EVENTS_MAX + 2 {
            let severity = if i % 2 == 0 {
                Severity::Info
            } else {
                Severity::Alert
            };
            log.write(severity, &format!("event {i}\nnext")).unwrap();
        }
        let recent = log.recent();
        assert_eq!(recent.len(), RECENT_EVENTS_MAX);
        assert_eq!(recent[0].texts, ["INFO", "event 2 next"]);
        let last = format!("event {} next", RECENT_EVENTS_MAX + 1);
        assert_eq!(
            recent[RECENT_EVENTS_MAX - 1].texts,
            ["ALERT", last.as_str()]
        );
        assert!(recent.iter().all(|r| r.ints.len() == 1 && r.ints[0] > 0));
        let file = std::fs::read_to_string(log.path()).unwrap();
        assert_eq!(
            file.lines().count(),
            RECENT_EVENTS_MAX + 2,
            "the file keeps all"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(format_utc(1_709_251_199), "2024-02-29 23:59:59");
        assert_eq!(format_utc(1_795_275_000), "2026-11-21 15:30:00");
        assert_eq!(format_utc(4_102_444_800), "2100-01-01 00:00:00");
    }

    #[test]
    fn line_format_matches_ndb() {
        let time = UNIX_EPOCH + Duration::from_secs(1_795_275_000);
        assert_eq!(
            format_line(time, Severity::Info, "Node 2: started"),
            "2026-11-21 15:30:00 [MgmtSrvr] INFO     -- Node 2: started\n"
        );
        assert_eq!(
            format_line(time, Severity::Alert, "Node 3: lost"),
            "2026-11-21 15:30:00 [MgmtSrvr] ALERT    -- Node 3: lost\n"
        );
    }

    #[test]
    fn text_from_the_network_stays_one_bounded_line() {
        let line = format_line(UNIX_EPOCH, Severity::Warning, "a\nforged line\r");
        assert!(line.ends_with("-- a forged line \n"));
        let long = "é".repeat(EVENT_TEXT_MAX_BYTES);
        let line = format_line(UNIX_EPOCH, Severity::Info, &long);
        assert!(line.len() < EVENT_TEXT_MAX_BYTES + 64);
        assert_eq!(line.matches('\n').count(), 1);
    }
}
