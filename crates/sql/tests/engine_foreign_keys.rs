//! FOREIGN KEYs under concurrent writers on two SQL nodes (two engines,
//! each its own cluster connection, over a `skarv sandbox` of two data
//! nodes with two replicas; the `skarv` binary built next to this test).
//!
//! The invariant (docs/sql.md, "FOREIGN KEY"): no committed child row
//! names a parent that is not there. It holds because a child's check
//! takes a shared lock on its parent and a parent's delete holds an
//! exclusive one before it looks for children. Writers on one node insert
//! children of random parents and move them; writers on the other delete
//! and re-insert parents (RESTRICT on one child table, CASCADE on the
//! other). Every statement either succeeds or fails with one of the
//! errors the constraint or a lock wait explains; at the end no child is
//! an orphan.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sql::backend::Backend;
use sql::engine::{Conn, Engine};

mod common;
use common::*;

/// Parents at the start; later ones get new ids (an id is never used
/// twice, so an orphan stays one to the end).
const PARENTS: u64 = 8;
/// How far back from the newest parent the writers pick theirs.
const RECENT_PARENTS: u64 = 8;
/// Transactions (or statements) per writer thread.
const STATEMENTS_PER_WRITER: u64 = 600;
/// Writer threads per SQL node.
const WRITERS_PER_NODE: u64 = 2;

/// The errors a statement of the workload may end with: a missing parent
/// (1452), a parent with children (1451), a duplicate key (1062), a lock
/// wait the cluster ended (1205), a temporary error to retry (1297).
const EXPECTED: [u16; 5] = [1452, 1451, 1062, 1205, 1297];

/// A small deterministic generator (xorshift), one per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn connect<'s>(engine: &Arc<Engine>, session: &'s skarv_client::Session) -> Conn<'s> {
    let mut conn = engine.open(session, IpAddr::V4(Ipv4Addr::LOCALHOST));
    log_in_root(&mut conn);
    conn.use_database("fk").expect("use fk");
    conn
}

/// Runs `sql`; an error must be one of [`EXPECTED`].
fn may_fail(conn: &mut Conn<'_>, sql: &str) {
    if let Err(e) = try_q(conn, sql) {
        assert!(EXPECTED.contains(&e.code), "{sql}: unexpected {e}");
    }
}

#[test]
fn no_orphans_with_writers_on_two_sql_nodes() {
    let sandbox = Sandbox::start("sql-fk", 2, 2, 44_000);
    let children_node = engine_on(&sandbox);
    let parents_node = engine_on(&sandbox);
    {
        let session = children_node.cluster.session().expect("session");
        let mut conn = children_node.open(&session, IpAddr::V4(Ipv4Addr::LOCALHOST));
        log_in_root(&mut conn);
        q(&mut conn, "CREATE DATABASE fk");
        conn.use_database("fk").expect("use fk");
        q(&mut conn, "CREATE TABLE p (id INT PRIMARY KEY, v INT)");
        q(
            &mut conn,
            "CREATE TABLE c (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES p (id))",
        );
        q(
            &mut conn,
            "CREATE TABLE d (id INT PRIMARY KEY, pid INT, \
             FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE)",
        );
        let parents: Vec<String> = (0..PARENTS).map(|i| format!("({i}, 0)")).collect();
        q(
            &mut conn,
            &format!("INSERT INTO p VALUES {}", parents.join(",")),
        );
    }
    // The next parent id to make.
    let next = AtomicU64::new(PARENTS);
    let recent = |rng: &mut Rng| {
        let newest = next.load(Ordering::Relaxed);
        newest - 1 - rng.below(RECENT_PARENTS.min(newest))
    };
    std::thread::scope(|scope| {
        for w in 0..WRITERS_PER_NODE {
            let engine = Arc::clone(&children_node);
            let recent = &recent;
            scope.spawn(move || {
                let session = engine.cluster.session().expect("session");
                let mut conn = connect(&engine, &session);
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w + 1));
                for n in 0..STATEMENTS_PER_WRITER {
                    let id = w * 1_000_000 + n;
                    let table = if rng.below(2) == 0 { "c" } else { "d" };
                    // Two writes in one transaction, so that the first
                    // one's parent lock is held across a round trip.
                    may_fail(&mut conn, "BEGIN");
                    may_fail(
                        &mut conn,
                        &format!("INSERT INTO {table} VALUES ({id}, {})", recent(&mut rng)),
                    );
                    let sql = if rng.below(2) == 0 {
                        format!(
                            "UPDATE {table} SET pid = {} WHERE id = {}",
                            recent(&mut rng),
                            w * 1_000_000 + rng.below(n + 1)
                        )
                    } else {
                        format!(
                            "INSERT INTO {table} VALUES ({}, {})",
                            id + 500_000,
                            recent(&mut rng)
                        )
                    };
                    may_fail(&mut conn, &sql);
                    may_fail(&mut conn, "COMMIT");
                }
            });
        }
        for w in 0..WRITERS_PER_NODE {
            let engine = Arc::clone(&parents_node);
            let (recent, next) = (&recent, &next);
            scope.spawn(move || {
                let session = engine.cluster.session().expect("session");
                let mut conn = connect(&engine, &session);
                let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (w + 1));
                for _ in 0..STATEMENTS_PER_WRITER {
                    let sql = match rng.below(3) {
                        0 => format!(
                            "INSERT INTO p VALUES ({}, 1)",
                            next.fetch_add(1, Ordering::Relaxed)
                        ),
                        1 => format!("UPDATE p SET v = v + 1 WHERE id = {}", recent(&mut rng)),
                        _ => format!("DELETE FROM p WHERE id = {}", recent(&mut rng)),
                    };
                    may_fail(&mut conn, &sql);
                }
            });
        }
    });
    let session = parents_node.cluster.session().expect("session");
    let mut conn = connect(&parents_node, &session);
    for table in ["c", "d"] {
        let orphans = q(
            &mut conn,
            &format!(
                "SELECT COUNT(*) FROM {table} WHERE pid IS NOT NULL AND pid NOT IN (SELECT id FROM p)"
            ),
        );
        assert_eq!(orphans, vec![vec!["0".to_owned()]], "orphans in {table}");
    }
    // The workload did write children (the check is not of empty tables).
    let written = q(&mut conn, "SELECT COUNT(*) FROM c");
    assert_ne!(written, vec![vec!["0".to_owned()]]);
}
