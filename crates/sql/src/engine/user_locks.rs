//! User-level locks: `GET_LOCK`, `RELEASE_LOCK`, `RELEASE_ALL_LOCKS`,
//! `IS_FREE_LOCK`, `IS_USED_LOCK` (MySQL's advisory locks, which migration
//! tools and job queues take). They are the SQL node's, as in MySQL
//! Cluster, where each mysqld keeps its own: two connections to one SQL
//! node exclude each other, connections to two SQL nodes do not
//! (docs/sql.md). A lock is held by one connection, which may take it
//! again (a count, as MySQL 5.7+); it is released by `RELEASE_LOCK` as
//! many times, by `RELEASE_ALL_LOCKS`, or when the connection closes.
//! Names compare with case, as MariaDB's (MySQL 5.7 and later ignore it).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{codes, SqlError, SqlResult};

/// Longest lock name in characters (MySQL's).
pub const LOCK_NAME_CHARS_MAX: usize = 64;

/// How often a waiting `GET_LOCK` looks at `KILL QUERY` and its
/// statement's deadline, in milliseconds.
pub const LOCK_WAIT_SLICE_MS: u64 = 10;

/// Locks a connection may hold at once: a bound on the table, which any
/// client could otherwise fill.
pub const LOCKS_PER_CONNECTION_MAX: usize = 1_024;

#[derive(Debug)]
struct Held {
    owner: u32,
    count: u32,
}

/// The SQL node's user-level locks.
#[derive(Debug, Default)]
pub struct UserLocks {
    held: Mutex<HashMap<String, Held>>,
    released: Condvar,
}

/// How a `GET_LOCK` ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Got {
    Taken,
    TimedOut,
    Interrupted,
}

/// A lock's name, checked (MariaDB compares names with case).
fn key(name: &str) -> SqlResult<String> {
    if name.is_empty() || name.chars().count() > LOCK_NAME_CHARS_MAX {
        return Err(SqlError::new(
            codes::USER_LOCK_WRONG_NAME,
            format!("Incorrect user-level lock name '{name}'."),
        ));
    }
    Ok(name.to_owned())
}

impl UserLocks {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `name` for connection `owner`, waiting at most `timeout`
    /// (None: forever) while `interrupted` says no.
    pub fn get(
        &self,
        name: &str,
        owner: u32,
        timeout: Option<Duration>,
        mut interrupted: impl FnMut() -> bool,
    ) -> SqlResult<Got> {
        let key = key(name)?;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut held = self.table();
        loop {
            match held.get_mut(&key) {
                Some(h) if h.owner == owner => {
                    h.count += 1;
                    return Ok(Got::Taken);
                }
                None => {
                    let mine = held.values().filter(|h| h.owner == owner).count();
                    if mine >= LOCKS_PER_CONNECTION_MAX {
                        return Err(SqlError::new(
                            codes::USER_LOCK_DEADLOCK,
                            format!(
                                "Deadlock found when trying to get user-level lock; this \
                                 connection holds {LOCKS_PER_CONNECTION_MAX} locks already"
                            ),
                        ));
                    }
                    held.insert(key, Held { owner, count: 1 });
                    return Ok(Got::Taken);
                }
                Some(_) => {}
            }
            if interrupted() {
                return Ok(Got::Interrupted);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(Got::TimedOut);
            }
            let slice = Duration::from_millis(LOCK_WAIT_SLICE_MS);
            let wait = deadline.map_or(slice, |d| (d - now).min(slice));
            held = self
                .released
                .wait_timeout(held, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// `RELEASE_LOCK`: Some(true) released once by its owner, Some(false)
    /// held by another connection, None not held at all.
    pub fn release(&self, name: &str, owner: u32) -> SqlResult<Option<bool>> {
        let key = key(name)?;
        let mut held = self.table();
        let answer = match held.get_mut(&key) {
            None => None,
            Some(h) if h.owner != owner => Some(false),
            Some(h) => {
                h.count -= 1;
                if h.count == 0 {
                    held.remove(&key);
                    self.released.notify_all();
                }
                Some(true)
            }
        };
        Ok(answer)
    }

    /// `RELEASE_ALL_LOCKS` (and a closing connection): every lock of
    /// `owner`; how many times they were taken.
    pub fn release_all(&self, owner: u32) -> u64 {
        let mut held = self.table();
        let mut released = 0u64;
        held.retain(|_, h| {
            let mine = h.owner == owner;
            if mine {
                released += u64::from(h.count);
            }
            !mine
        });
        if released > 0 {
            self.released.notify_all();
        }
        released
    }

    /// The connection holding `name`, if any (`IS_USED_LOCK`;
    /// `IS_FREE_LOCK` is its absence).
    pub fn holder(&self, name: &str) -> SqlResult<Option<u32>> {
        let key = key(name)?;
        Ok(self.table().get(&key).map(|h| h.owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_excludes_other_connections_until_released_as_often_as_taken() {
        let locks = UserLocks::default();
        let never = || false;
        assert_eq!(locks.get("job", 1, None, never).unwrap(), Got::Taken);
        assert_eq!(locks.get("job", 1, None, never).unwrap(), Got::Taken);
        assert_eq!(locks.holder("job").unwrap(), Some(1));
        assert_eq!(locks.holder("JOB").unwrap(), None, "names keep their case");
        let zero = Some(Duration::ZERO);
        assert_eq!(locks.get("job", 2, zero, never).unwrap(), Got::TimedOut);
        assert_eq!(locks.release("job", 2).unwrap(), Some(false));
        assert_eq!(locks.release("job", 1).unwrap(), Some(true));
        assert_eq!(locks.get("job", 2, zero, never).unwrap(), Got::TimedOut);
        assert_eq!(locks.release("job", 1).unwrap(), Some(true));
        assert_eq!(locks.release("job", 1).unwrap(), None);
        assert_eq!(locks.get("job", 2, zero, never).unwrap(), Got::Taken);
        assert_eq!(locks.release_all(2), 1);
        assert_eq!(locks.holder("job").unwrap(), None);
        assert_eq!(locks.get("", 1, zero, never).unwrap_err().code, 3057);
    }

    #[test]
    fn a_waiter_gets_the_lock_when_its_holder_lets_go() {
        let locks = std::sync::Arc::new(UserLocks::default());
        assert_eq!(locks.get("l", 1, None, || false).unwrap(), Got::Taken);
        let waiter = {
            let locks = std::sync::Arc::clone(&locks);
            std::thread::spawn(move || locks.get("l", 2, Some(Duration::from_secs(60)), || false))
        };
        // The waiter is waiting (or about to) on the lock; the holder's
        // close lets it go.
        assert_eq!(locks.release_all(1), 1);
        assert_eq!(waiter.join().unwrap().unwrap(), Got::Taken);
        assert_eq!(locks.holder("l").unwrap(), Some(2));
        let interrupted = locks.get("l", 3, None, || true).unwrap();
        assert_eq!(interrupted, Got::Interrupted);
    }
}
