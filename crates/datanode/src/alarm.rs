//! Warnings before the cliff (docs/operations.md, "Alarms"): an LDM
//! instance watches its share of DataMemory and its redo log, and says in
//! the cluster log when either passes 80 % and 90 % in use, and when it
//! falls back, before writes start failing with "table full" or 410 "redo
//! log overloaded". The thresholds are `signal::dbinfo`'s, which the
//! mgmd's metrics use too.

use signal::dbinfo::{alarm_level, ALARM_CRITICAL_PERCENT, ALARM_WARNING_PERCENT};
use signal::Severity;

/// A level is left only this many points under its threshold, so that use
/// that hovers at a threshold does not fill the cluster log.
pub const ALARM_CLEAR_MARGIN_PERCENT: u64 = 5;

/// One watched resource's alarm.
#[derive(Debug, Default)]
pub struct Alarm {
    level: u64,
}

impl Alarm {
    pub fn level(&self) -> u64 {
        self.level
    }

    /// Takes `used` of `total` now; returns what to log when the level
    /// changed: up at once, down only `ALARM_CLEAR_MARGIN_PERCENT` under
    /// the level left.
    /// `what` names the resource in the text; it is rendered only then.
    pub fn update(
        &mut self,
        what: impl std::fmt::Display,
        used: u64,
        total: u64,
    ) -> Option<(Severity, String)> {
        if total == 0 {
            return None;
        }
        let percent = used.saturating_mul(100) / total;
        let reached = alarm_level(used, total);
        let new = if reached >= self.level {
            reached
        } else {
            // Falling: a level is kept while use is within the margin
            // under it.
            [ALARM_CRITICAL_PERCENT, ALARM_WARNING_PERCENT]
                .into_iter()
                .find(|t| *t <= self.level && percent + ALARM_CLEAR_MARGIN_PERCENT > *t)
                .unwrap_or(0)
        };
        if new == self.level {
            return None;
        }
        let old = std::mem::replace(&mut self.level, new);
        let text = if new > old {
            let then = if new >= ALARM_CRITICAL_PERCENT {
                "writes fail when it is full"
            } else {
                "free space or add memory before writes fail"
            };
            format!("{what} {percent}% in use ({used} of {total}): past {new}%; {then}")
        } else {
            format!("{what} {percent}% in use ({used} of {total}): back under {old}%")
        };
        let severity = match new {
            n if n >= ALARM_CRITICAL_PERCENT => Severity::Alert,
            n if n >= ALARM_WARNING_PERCENT && n > old => Severity::Warning,
            _ => Severity::Info,
        };
        Some((severity, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rise_at_once_and_fall_with_a_margin() {
        let mut alarm = Alarm::default();
        assert_eq!(alarm.update("DataMemory", 79, 100), None);
        let (severity, text) = alarm.update("DataMemory", 80, 100).expect("80 %");
        assert_eq!(severity, Severity::Warning);
        assert!(text.contains("80% in use (80 of 100): past 80%"), "{text}");
        // Hovering at the threshold logs nothing more.
        assert_eq!(alarm.update("DataMemory", 79, 100), None);
        assert_eq!(alarm.update("DataMemory", 80, 100), None);
        let (severity, text) = alarm.update("DataMemory", 95, 100).expect("90 %");
        assert_eq!(severity, Severity::Alert);
        assert!(text.contains("past 90%"), "{text}");
        assert_eq!(alarm.level(), 90);
        assert_eq!(alarm.update("DataMemory", 86, 100), None);
        let (severity, text) = alarm.update("DataMemory", 84, 100).expect("under 90");
        assert_eq!(severity, Severity::Info);
        assert!(text.contains("back under 90%"), "{text}");
        assert_eq!(alarm.level(), 80);
        let (_, text) = alarm.update("DataMemory", 10, 100).expect("under 80");
        assert!(text.contains("back under 80%"), "{text}");
        assert_eq!(alarm.level(), 0);
        assert_eq!(alarm.update("DataMemory", 10, 0), None);
    }

    #[test]
    fn alarm_level_names_the_highest_threshold_reached() {
        assert_eq!(alarm_level(0, 0), 0);
        assert_eq!(alarm_level(799, 1000), 0);
        assert_eq!(alarm_level(800, 1000), 80);
        assert_eq!(alarm_level(899, 1000), 80);
        assert_eq!(alarm_level(900, 1000), 90);
        assert_eq!(alarm_level(1000, 1000), 90);
    }
}
