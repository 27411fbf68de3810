//! A warm lock table locks, waits, grants and unlocks without touching the
//! heap: the LDM does this for every locking operation, so an allocation
//! here would be one per operation. Counted with a global allocator that
//! counts the allocations of the current thread (tests run in parallel).

use storage::locks::{Acquire, Grant, LockMode, LockTable, OpId, TxId};
use storage::RowId;

use testkit::allocations;

// This binary counts each thread's allocations (testkit::CountingAllocator).
#[global_allocator]
static ALLOCATOR: testkit::CountingAllocator = testkit::CountingAllocator;

const ROWS: u32 = 1_000;

/// One round: every row locked exclusively by one transaction, contended by
/// two shared readers and a second writer, an upgrade on half of the rows,
/// then everything released and granted in turn; then uncontended pairs.
fn round(table: &mut LockTable, grants: &mut Vec<Grant>, base: u64) {
    let writer = TxId(base);
    let (reader, other_reader, second_writer) = (TxId(base + 1), TxId(base + 2), TxId(base + 3));
    let all_rows = || (0..ROWS).map(RowId);
    for row in all_rows() {
        assert_eq!(
            table.acquire(row, writer, OpId(1), LockMode::Exclusive),
            Ok(Acquire::Granted)
        );
        assert_eq!(
            table.acquire(row, reader, OpId(2), LockMode::Shared),
            Ok(Acquire::Queued)
        );
        assert_eq!(
            table.acquire(row, other_reader, OpId(3), LockMode::Shared),
            Ok(Acquire::Queued)
        );
        assert_eq!(
            table.acquire(row, second_writer, OpId(4), LockMode::Exclusive),
            Ok(Acquire::Queued)
        );
    }
    grants.clear();
    assert_eq!(table.release_all(writer, all_rows(), grants), ROWS as usize);
    assert_eq!(
        grants.len(),
        2 * ROWS as usize,
        "both readers get every row"
    );
    for row in all_rows().step_by(2) {
        assert_eq!(
            table.acquire(row, reader, OpId(5), LockMode::Exclusive),
            Ok(Acquire::Queued)
        );
    }
    grants.clear();
    assert_eq!(
        table.release_all(other_reader, all_rows(), grants),
        ROWS as usize
    );
    assert_eq!(grants.len(), ROWS as usize / 2, "the upgrades are granted");
    grants.clear();
    assert_eq!(table.release_all(reader, all_rows(), grants), ROWS as usize);
    assert_eq!(
        grants.len(),
        ROWS as usize,
        "the second writer gets every row"
    );
    assert_eq!(
        table.release_all(second_writer, all_rows(), grants),
        ROWS as usize
    );
    assert!(table.is_empty());
    for row in all_rows() {
        assert_eq!(
            table.acquire(row, writer, OpId(6), LockMode::Exclusive),
            Ok(Acquire::Granted)
        );
        assert!(table.release_tx(writer, row, grants));
    }
}

#[test]
fn a_warm_lock_table_does_not_allocate() {
    let mut table = LockTable::new();
    let mut grants = Vec::with_capacity(4 * ROWS as usize);
    round(&mut table, &mut grants, 100);
    let before = allocations();
    for base in 0..10u64 {
        round(&mut table, &mut grants, 1_000 + 10 * base);
    }
    assert_eq!(allocations() - before, 0, "allocations in warm rounds");
    // The counter works at all.
    let boxed = Box::new(1u8);
    assert!(allocations() > before, "{boxed}");
}
