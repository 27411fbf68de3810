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
//!
//! What is written follows NDB's `CLUSTERLOG` filter ([`Filter`]): the
//! whole log on or off, each severity on or off, and per node and event
//! category a threshold (0 to 15): an event about node N of category C and
//! level L is written when the log and its severity are on and L is at
//! most N's threshold for C. The filter lives in the mgmd's memory: a
//! restarted mgmd writes everything again, as NDB's does.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use signal::{DbinfoRow, EventCategory, NodeId, Severity, EVENT_LEVEL_MAX};

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

/// Which events the cluster log writes (NDB's `CLUSTERLOG`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    enabled: bool,
    /// Severities switched off.
    off: Vec<Severity>,
    /// Thresholds changed from their category's default
    /// ([`EventCategory::default_threshold`]).
    thresholds: HashMap<(NodeId, EventCategory), u8>,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter {
            enabled: true,
            off: Vec::new(),
            thresholds: HashMap::new(),
        }
    }
}

impl Filter {
    /// Whether an event about `node` is written.
    pub fn passes(
        &self,
        node: NodeId,
        severity: Severity,
        category: EventCategory,
        level: u8,
    ) -> bool {
        self.enabled && !self.off.contains(&severity) && level <= self.threshold(node, category)
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The severities written (when the log is on), least severe first.
    pub fn severities(&self) -> Vec<Severity> {
        Severity::ALL
            .iter()
            .copied()
            .filter(|s| !self.off.contains(s))
            .collect()
    }

    pub fn threshold(&self, node: NodeId, category: EventCategory) -> u8 {
        self.thresholds
            .get(&(node, category))
            .copied()
            .unwrap_or_else(|| category.default_threshold())
    }

    /// `CLUSTERLOG ON|OFF [severity ...]`: the named severities, or with
    /// none the whole log.
    pub fn switch(&mut self, severities: &[Severity], on: bool) {
        if severities.is_empty() {
            self.enabled = on;
            return;
        }
        for &severity in severities {
            self.off.retain(|s| *s != severity);
            if !on {
                self.off.push(severity);
            }
        }
    }

    /// `CLUSTERLOG TOGGLE [severity ...]`.
    pub fn toggle(&mut self, severities: &[Severity]) {
        if severities.is_empty() {
            self.enabled = !self.enabled;
            return;
        }
        for &severity in severities {
            let on = self.off.contains(&severity);
            self.switch(&[severity], on);
        }
    }

    /// `N CLUSTERLOG category=threshold`; `threshold` at most
    /// [`EVENT_LEVEL_MAX`].
    pub fn set_threshold(&mut self, node: NodeId, category: EventCategory, threshold: u8) {
        assert!(threshold <= EVENT_LEVEL_MAX, "threshold {threshold}");
        if threshold == category.default_threshold() {
            self.thresholds.remove(&(node, category));
        } else {
            self.thresholds.insert((node, category), threshold);
        }
    }
}

pub struct ClusterLog {
    path: PathBuf,
    file: File,
    /// The latest events as rows (see [`EVENTLOG`]), oldest first.
    recent: VecDeque<DbinfoRow>,
    filter: Filter,
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
            filter: Filter::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The latest events (at most [`RECENT_EVENTS_MAX`]), oldest first.
    pub fn recent(&self) -> Vec<DbinfoRow> {
        self.recent.iter().cloned().collect()
    }

    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    pub fn filter_mut(&mut self) -> &mut Filter {
        &mut self.filter
    }

    /// Appends one line for an event about `node`, and mirrors it to the
    /// process log, when the filter lets it through; returns whether it
    /// did.
    pub fn write(&mut self, event: Event<'_>) -> io::Result<bool> {
        let Event {
            node,
            severity,
            category,
            level,
            text,
        } = event;
        if !self.filter.passes(node, severity, category, level) {
            return Ok(false);
        }
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
        self.file.flush()?;
        Ok(true)
    }
}

/// One cluster-log event: about (or from) `node`, of `category` at `level`.
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    pub node: NodeId,
    pub severity: Severity,
    pub category: EventCategory,
    pub level: u8,
    pub text: &'a str,
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
    use signal::{EventKind, EVENT_THRESHOLD_DEFAULT};
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
            let text = format!("event {i}\nnext");
            let event = Event {
                node: NodeId::new(2).unwrap(),
                severity,
                category: EventCategory::Info,
                level: 1,
                text: &text,
            };
            assert!(log.write(event).unwrap());
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
    fn the_filter_follows_clusterlog_verbs() {
        let two = NodeId::new(2).unwrap();
        let three = NodeId::new(3).unwrap();
        let mut f = Filter::default();
        let startup = EventCategory::Startup;
        assert!(f.passes(two, Severity::Info, startup, EVENT_THRESHOLD_DEFAULT));
        assert!(!f.passes(two, Severity::Info, startup, EVENT_THRESHOLD_DEFAULT + 1));
        f.switch(&[Severity::Info], false);
        assert!(!f.passes(two, Severity::Info, startup, 0));
        assert!(f.passes(two, Severity::Alert, startup, 0));
        assert_eq!(f.severities(), [Severity::Warning, Severity::Alert]);
        f.toggle(&[Severity::Info, Severity::Alert]);
        assert_eq!(f.severities(), [Severity::Info, Severity::Warning]);
        f.switch(&[], false);
        assert!(!f.enabled() && !f.passes(two, Severity::Info, startup, 0));
        f.toggle(&[]);
        assert!(f.enabled());
        f.set_threshold(two, startup, 0);
        assert!(f.passes(two, Severity::Info, startup, 0));
        assert!(!f.passes(two, Severity::Info, startup, 1));
        assert!(
            f.passes(three, Severity::Info, startup, 1),
            "node 3 unchanged"
        );
        assert!(f.passes(two, Severity::Info, EventCategory::Connection, 1));
        f.set_threshold(two, startup, EVENT_THRESHOLD_DEFAULT);
        assert_eq!(f, {
            let mut expected = Filter::default();
            expected.toggle(&[Severity::Alert]);
            expected
        });
    }

    /// Each kind's level against its category's default threshold: NDB's
    /// defaults, but NODERESTART 8, keep every kind but none of those
    /// beyond them; a threshold of 2 keeps a node's start (level 1) and
    /// drops its join (level 3), both INFO.
    #[test]
    fn kinds_have_levels_and_categories_their_defaults() {
        let two = NodeId::new(2).unwrap();
        let mut f = Filter::default();
        let threshold = |f: &Filter, c| f.threshold(two, c);
        assert_eq!(
            threshold(&f, EventCategory::Startup),
            EVENT_THRESHOLD_DEFAULT
        );
        assert_eq!(threshold(&f, EventCategory::Connection), 8);
        assert_eq!(threshold(&f, EventCategory::NodeRestart), 8);
        assert_eq!(threshold(&f, EventCategory::Error), EVENT_LEVEL_MAX);
        assert_eq!(threshold(&f, EventCategory::Backup), EVENT_LEVEL_MAX);
        let passes = |f: &Filter, kind: EventKind| {
            f.passes(two, Severity::Info, kind.category(), kind.level())
        };
        for kind in [
            EventKind::NodeFailed,
            EventKind::ApiConnected,
            EventKind::HeartbeatsMissed,
            EventKind::CheckpointResumed,
            EventKind::NodeAdmitted,
        ] {
            assert!(passes(&f, kind), "{kind:?} written by default");
        }
        f.set_threshold(two, EventCategory::Startup, 2);
        assert!(passes(&f, EventKind::NodeStarted));
        assert!(!passes(&f, EventKind::Joined));
        f.set_threshold(two, EventCategory::NodeRestart, 7);
        assert!(passes(&f, EventKind::NodeAdmitted));
        assert!(!passes(&f, EventKind::NodeFailed));
        f.set_threshold(two, EventCategory::Startup, EVENT_THRESHOLD_DEFAULT);
        f.set_threshold(two, EventCategory::NodeRestart, 8);
        assert_eq!(f, Filter::default(), "a category's default is no change");
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
