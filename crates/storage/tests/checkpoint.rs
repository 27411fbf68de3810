//! Local checkpoints against a model: random inserts, updates and deletes
//! interleaved with checkpoint steps, crashes at random points (simulated
//! disk), abandoned and failed LCPs, then restore. What must hold: the
//! restored rows plus every change made since the restored LCP started,
//! re-applied as idempotent upserts and deletes by row id (what redo
//! replay does), equal the rows the store held; pages the LCP wrote hold
//! exactly what they held when written; a partial LCP writes exactly the
//! committed rows marked changed of the pages it visits; after an LCP that
//! did not complete the next one is full; damage is refused with the file
//! and offset; an unfinished LCP is ignored; a partial LCP writes little
//! when little changed, even spread at random.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use storage::checkpoint::{
    prune, restore, CheckpointError, CheckpointKind, CheckpointWriter, CompletedLcp, LcpStart,
    Progress, RestoredCheckpoint, FULL_CHECKPOINT_EVERY,
};
use storage::disk::{Disk, OpenMode, RealDisk, SimDisk};
use storage::memory::{row_page, PagePool, RowStore};
use storage::redo::Lsn;
use storage::RowId;

const TABLE: u32 = 7;
const FRAGMENT: u32 = 2;
const POOL_PAGES: u32 = 4096;

fn dir() -> PathBuf {
    PathBuf::from("/node/lcp")
}

/// SplitMix64: seeded, so that a failing seed replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

type Row = (Vec<u8>, Vec<u8>);

/// A committed change, as the redo log would hold it: the row's new image,
/// or `None` for a delete.
type Change = (RowId, Option<Row>);

/// The row store, and what it must hold.
struct World {
    pool: PagePool,
    store: RowStore,
    /// Committed rows.
    model: BTreeMap<RowId, Row>,
    /// Committed row ids, for picking one at random.
    ids: Vec<RowId>,
    position: HashMap<RowId, usize>,
    /// Live uncommitted inserts.
    uncommitted: Vec<RowId>,
    /// Every committed change in order: the redo log of this test.
    history: Vec<Change>,
    var_len_max: usize,
    /// Row ids that ever held a committed row.
    ever: HashSet<RowId>,
    /// Committed inserts into a row id that held an earlier, deleted row.
    slot_reuses: u32,
}

impl World {
    fn new(fixed_bytes: usize, var_len_max: usize) -> World {
        let store = if var_len_max > 0 {
            RowStore::with_var_parts(fixed_bytes)
        } else {
            RowStore::new(fixed_bytes)
        };
        World {
            pool: PagePool::new(POOL_PAGES),
            store,
            model: BTreeMap::new(),
            ids: Vec::new(),
            position: HashMap::new(),
            uncommitted: Vec::new(),
            history: Vec::new(),
            var_len_max,
            ever: HashSet::new(),
            slot_reuses: 0,
        }
    }

    fn new_row(&self, rng: &mut Rng) -> Row {
        let fixed = rng.bytes(self.store.fixed_bytes());
        let var_len = if self.var_len_max > 0 {
            rng.below(self.var_len_max as u64 + 1) as usize
        } else {
            0
        };
        (fixed, rng.bytes(var_len))
    }

    fn commit_change(&mut self, row: RowId, image: Option<Row>) {
        match &image {
            Some(r) => {
                if self.model.insert(row, r.clone()).is_none() {
                    self.position.insert(row, self.ids.len());
                    self.ids.push(row);
                    if !self.ever.insert(row) {
                        self.slot_reuses += 1;
                    }
                }
            }
            None => {
                self.model.remove(&row).expect("a committed row");
                let at = self.position.remove(&row).expect("a committed row");
                self.ids.swap_remove(at);
                if let Some(&moved) = self.ids.get(at) {
                    self.position.insert(moved, at);
                }
            }
        }
        self.history.push((row, image));
    }

    fn insert(&mut self, rng: &mut Rng) -> RowId {
        let (fixed, var) = self.new_row(rng);
        let row = self.store.insert(&mut self.pool, &fixed, &var).unwrap();
        self.commit_change(row, Some((fixed, var)));
        row
    }

    fn update(&mut self, rng: &mut Rng, row: RowId) {
        let (fixed, var) = self.new_row(rng);
        self.store
            .update(&mut self.pool, row, &fixed, &var)
            .unwrap();
        self.commit_change(row, Some((fixed, var)));
    }

    fn delete(&mut self, row: RowId) {
        self.store.delete(&mut self.pool, row);
        self.commit_change(row, None);
    }

    /// A committed row: in `hot_page` mostly, so that partial LCPs happen
    /// (they are page-granular).
    fn pick(&self, rng: &mut Rng, hot_page: u32) -> Option<RowId> {
        if rng.chance(90) {
            let in_hot: Vec<RowId> = self
                .store
                .page_rows(hot_page)
                .filter(|r| self.model.contains_key(r))
                .collect();
            if !in_hot.is_empty() {
                return Some(in_hot[rng.below(in_hot.len() as u64) as usize]);
            }
        }
        if self.ids.is_empty() {
            return None;
        }
        Some(self.ids[rng.below(self.ids.len() as u64) as usize])
    }

    /// One random operation.
    fn random_op(&mut self, rng: &mut Rng, hot_page: u32, rows_max: usize) {
        let roll = rng.below(1000);
        let full = self.model.len() + self.uncommitted.len() >= rows_max;
        if roll < 300 && !full {
            self.insert(rng);
        } else if roll < 380 && !full {
            // An insert that is not committed yet.
            let (fixed, var) = self.new_row(rng);
            let row = self.store.insert(&mut self.pool, &fixed, &var).unwrap();
            self.store.set_uncommitted(&mut self.pool, row, true);
            self.uncommitted.push(row);
        } else if roll < 460 && !self.uncommitted.is_empty() {
            let at = rng.below(self.uncommitted.len() as u64) as usize;
            let row = self.uncommitted.swap_remove(at);
            if rng.chance(50) {
                self.store.set_uncommitted(&mut self.pool, row, false);
                let image = (
                    self.store.fixed(&self.pool, row).to_vec(),
                    self.store.var(&self.pool, row).to_vec(),
                );
                self.commit_change(row, Some(image));
            } else {
                // Abort: the row goes; it never was committed, so the redo
                // log has nothing of it.
                self.store.delete(&mut self.pool, row);
            }
        } else if roll < 750 {
            if let Some(row) = self.pick(rng, hot_page) {
                self.update(rng, row);
            }
        } else if roll < 995 {
            if let Some(row) = self.pick(rng, hot_page) {
                self.delete(row);
            }
        } else {
            // Empty a whole page.
            let page = rng.below(u64::from(self.store.page_count()).max(1)) as u32;
            let rows: Vec<RowId> = self
                .store
                .page_rows(page)
                .filter(|r| self.model.contains_key(r))
                .collect();
            for row in rows {
                self.delete(row);
            }
        }
    }

    /// The committed rows of a page, as they are now.
    fn page_image(&self, page: u32) -> Vec<(RowId, Row)> {
        self.store
            .page_rows(page)
            .filter_map(|r| self.model.get(&r).map(|row| (r, row.clone())))
            .collect()
    }

    /// Pages that hold a row now (the page list an LCP ending now writes).
    fn pages_in_use(&self) -> Vec<u32> {
        (0..self.store.page_count())
            .filter(|&p| self.store.page_rows(p).next().is_some())
            .collect()
    }
}

fn start(lcp_id: u64, redo_start: u64) -> LcpStart {
    LcpStart {
        table_id: TABLE,
        table_version: 1,
        fragment_id: FRAGMENT,
        lcp_id,
        redo_start: Lsn(redo_start),
        max_gci: lcp_id as u32 * 10,
    }
}

/// Runs a whole LCP with no change between steps.
fn checkpoint(
    disk: &dyn Disk,
    dir: &Path,
    world: &mut World,
    lcp_id: u64,
    previous: Option<&CompletedLcp>,
) -> CompletedLcp {
    let redo_start = world.history.len() as u64;
    let mut writer = CheckpointWriter::start(
        disk,
        dir,
        start(lcp_id, redo_start),
        previous,
        &mut world.store,
    )
    .unwrap();
    while writer.step(&world.pool, &mut world.store, 3).unwrap() == Progress::More {}
    writer.finish(disk).unwrap()
}

/// Restores into a fresh row store shaped like the world's.
fn restore_fresh(
    disk: &dyn Disk,
    dir: &Path,
    like: &RowStore,
) -> (
    Result<Option<RestoredCheckpoint>, CheckpointError>,
    PagePool,
    RowStore,
) {
    let mut pool = PagePool::new(POOL_PAGES);
    let mut store = if like.has_var_parts() {
        RowStore::with_var_parts(like.fixed_bytes())
    } else {
        RowStore::new(like.fixed_bytes())
    };
    let result = restore(disk, dir, TABLE, FRAGMENT, &mut pool, &mut store);
    (result, pool, store)
}

/// Every row of a store, by row id.
fn contents(pool: &PagePool, store: &RowStore) -> BTreeMap<RowId, Row> {
    store
        .rows()
        .map(|r| {
            (
                r,
                (store.fixed(pool, r).to_vec(), store.var(pool, r).to_vec()),
            )
        })
        .collect()
}

/// Redo replay: idempotent upserts and deletes by row id.
fn replay(pool: &mut PagePool, store: &mut RowStore, changes: &[Change]) {
    for (row, image) in changes {
        match (image, store.is_live(*row)) {
            (Some((fixed, var)), true) => store.update(pool, *row, fixed, var).unwrap(),
            (Some((fixed, var)), false) => {
                store.insert_at(pool, *row, fixed, var).unwrap();
                store.mark_changed(*row);
            }
            (None, true) => store.delete(pool, *row),
            (None, false) => {}
        }
    }
}

// ---------------------------------------------------------------------------
// The model test

/// What the test knows of an LCP it ran.
#[derive(Clone)]
struct LcpRecord {
    completed: CompletedLcp,
    /// Each page written, as it was when written.
    written: BTreeMap<u32, Vec<(RowId, Row)>>,
    /// Pages in use when the page list was written.
    in_use: Vec<u32>,
}

struct Scenario {
    rng: Rng,
    disk: SimDisk,
    world: World,
    next_lcp_id: u64,
    /// The newest complete LCP, and what the next one builds on.
    last: Option<LcpRecord>,
    previous: Option<CompletedLcp>,
    rows_max: usize,
    crashes: u32,
    restores_checked: u32,
    kinds: [u32; 2],
    /// An LCP started since `previous` and did not complete: the next one
    /// must be full.
    must_be_full: bool,
    /// LCPs that were full because of that.
    forced_full: u32,
    /// LCPs dropped half-way.
    abandoned: u32,
    /// Committed changes to rows of pages the running LCP had written.
    after_written: u32,
}

impl Scenario {
    fn new(seed: u64) -> Scenario {
        let mut rng = Rng(seed);
        let fixed_bytes = [100, 200, 400][rng.below(3) as usize];
        let var_len_max = [0, 40, 400][rng.below(3) as usize];
        Scenario {
            disk: SimDisk::new(seed ^ 0xC0FF_EE00),
            world: World::new(fixed_bytes, var_len_max),
            rows_max: 1000 + rng.below(3000) as usize,
            rng,
            next_lcp_id: 1,
            last: None,
            previous: None,
            crashes: 0,
            restores_checked: 0,
            kinds: [0, 0],
            must_be_full: false,
            forced_full: 0,
            abandoned: 0,
            after_written: 0,
        }
    }

    /// The rows a step writes of `pages`: the committed ones, for a
    /// partial LCP only those marked changed.
    fn rows_to_write(&self, kind: CheckpointKind, pages: &[u32]) -> u64 {
        let world = &self.world;
        let rows = pages.iter().flat_map(|&p| world.store.page_rows(p));
        rows.filter(|r| world.model.contains_key(r))
            .filter(|&r| kind == CheckpointKind::Full || world.store.is_changed(r))
            .count() as u64
    }

    fn ops(&mut self, count: u64, hot_page: u32) {
        for _ in 0..count {
            self.world.random_op(&mut self.rng, hot_page, self.rows_max);
        }
    }

    /// One LCP with changes between its steps; may crash in it. Returns
    /// whether the disk crashed.
    fn run_lcp(&mut self) -> bool {
        let hot_page = self
            .rng
            .below(u64::from(self.world.store.page_count()).max(1)) as u32;
        let lcp_id = self.next_lcp_id;
        self.next_lcp_id += 1;
        let redo_start = self.world.history.len() as u64;
        let mut writer = CheckpointWriter::start(
            &self.disk,
            &dir(),
            start(lcp_id, redo_start),
            self.previous.as_ref(),
            &mut self.world.store,
        )
        .unwrap();
        let kind = writer.kind();
        self.kinds[usize::from(kind == CheckpointKind::Partial)] += 1;
        if self.must_be_full {
            assert_eq!(
                kind,
                CheckpointKind::Full,
                "LCP {lcp_id} after one that failed"
            );
            self.forced_full += 1;
        }
        // Until this one completes, the previous is not the last started.
        self.must_be_full = true;
        let mut written = BTreeMap::new();
        let mut rows_expected = 0u64;
        let in_use = loop {
            // Often change rows of pages this LCP has written already.
            let hot = match written
                .keys()
                .nth(self.rng.below(written.len().max(1) as u64) as usize)
            {
                Some(&page) if self.rng.chance(50) => page,
                _ => hot_page,
            };
            let ops = self.rng.below(8);
            let history_before = self.world.history.len();
            self.ops(ops, hot);
            self.after_written += self.world.history[history_before..]
                .iter()
                .filter(|(row, _)| written.contains_key(&row_page(*row)))
                .count() as u32;
            if self.rng.chance(3) {
                return true;
            }
            if self.rng.chance(3) {
                // Abandoned: the rows it wrote are unmarked, in no LCP.
                self.abandoned += 1;
                return false;
            }
            let before = writer.pages_written();
            let pages_max = 1 + self.rng.below(4) as usize;
            let upcoming = &writer.pages()[before..(before + pages_max).min(writer.pages().len())];
            rows_expected += self.rows_to_write(kind, upcoming);
            let progress = writer
                .step(&self.world.pool, &mut self.world.store, pages_max)
                .unwrap();
            for &page in &writer.pages()[before..writer.pages_written()] {
                written.insert(page, self.world.page_image(page));
                let store = &self.world.store;
                assert!(
                    store
                        .page_rows(page)
                        .all(|r| !self.world.model.contains_key(&r) || !store.is_changed(r)),
                    "a committed row of page {page} is still marked after its page was written"
                );
            }
            if progress == Progress::Done {
                break self.world.pages_in_use();
            }
        };
        let ops = self.rng.below(4);
        self.ops(ops, hot_page);
        if self.rng.chance(8) {
            // The data file's fsync fails: the LCP is not complete, and the
            // next one must be full.
            self.disk.fail_next_sync();
            assert!(matches!(
                writer.finish(&self.disk),
                Err(CheckpointError::Io { op: "fsync", .. })
            ));
            return false;
        }
        let completed = writer.finish(&self.disk).unwrap();
        assert_eq!(
            completed.rows_written, rows_expected,
            "rows LCP {lcp_id} wrote"
        );
        self.must_be_full = false;
        self.previous = Some(completed);
        self.last = Some(LcpRecord {
            completed,
            written,
            in_use,
        });
        if self.rng.chance(50) {
            prune(&self.disk, &dir(), TABLE, FRAGMENT).unwrap();
        }
        false
    }

    /// Crash, restore, check, replay, check, and go on with the restored
    /// row store.
    fn crash_and_recover(&mut self) {
        self.crashes += 1;
        self.disk.crash();
        let (result, mut pool, mut store) = restore_fresh(&self.disk, &dir(), &self.world.store);
        let restored = result.unwrap();
        let replay_from = match (&restored, &self.last) {
            (None, None) => 0,
            (Some(r), Some(last)) => {
                assert_eq!(r.lcp_id, last.completed.lcp_id, "the newest complete LCP");
                assert_eq!(r.redo_start, last.completed.redo_start);
                assert_eq!(r.max_gci, last.completed.max_gci);
                store.check_invariants(&pool);
                self.check_written_pages(&pool, &store, last);
                self.restores_checked += 1;
                r.redo_start.0 as usize
            }
            (r, last) => panic!(
                "restored {:?}, newest complete LCP {:?}",
                r.as_ref().map(|r| r.lcp_id),
                last.as_ref().map(|l| l.completed.lcp_id)
            ),
        };
        replay(&mut pool, &mut store, &self.world.history[replay_from..]);
        store.check_invariants(&pool);
        assert_eq!(
            contents(&pool, &store),
            self.world.model,
            "restored LCP + redo replay == the rows committed before the crash"
        );
        // Go on from the restored store: uncommitted inserts died with the
        // process.
        self.world.pool = pool;
        self.world.store = store;
        self.world.uncommitted.clear();
        self.previous = restored.map(|r| r.completed);
        self.must_be_full = false;
    }

    /// Pages the restored LCP wrote hold exactly what they held when it
    /// wrote them (or nothing, when no row was left in them at its end).
    fn check_written_pages(&self, pool: &PagePool, store: &RowStore, last: &LcpRecord) {
        for (&page, image) in &last.written {
            let restored: Vec<(RowId, Row)> = store
                .page_rows(page)
                .map(|r| {
                    (
                        r,
                        (store.fixed(pool, r).to_vec(), store.var(pool, r).to_vec()),
                    )
                })
                .collect();
            if last.in_use.contains(&page) {
                assert_eq!(&restored, image, "page {page} as the LCP wrote it");
            } else {
                assert!(restored.is_empty(), "page {page} was not in use at the end");
            }
        }
        let listed = |p: &u32| last.in_use.contains(p);
        assert!(
            (0..store.page_count())
                .filter(|p| store.page_rows(*p).next().is_some())
                .all(|p| listed(&p)),
            "only listed pages hold rows"
        );
    }
}

#[test]
fn model_restore_plus_redo_equals_the_rows_through_crashes() {
    let mut total = Scenario::new(0);
    for seed in 1..=24u64 {
        let mut s = Scenario::new(seed);
        // Warm up a few pages' worth of rows.
        for _ in 0..s.rows_max / 2 {
            s.world.insert(&mut s.rng);
        }
        for _round in 0..40 {
            let hot = s.rng.below(u64::from(s.world.store.page_count()).max(1)) as u32;
            let ops = s.rng.below(20);
            s.ops(ops, hot);
            let crashed_in_lcp = s.run_lcp();
            if crashed_in_lcp || s.rng.chance(10) {
                s.crash_and_recover();
            }
        }
        s.crash_and_recover();
        assert!(s.restores_checked > 0, "seed {seed}: no restore checked");
        total.crashes += s.crashes;
        total.restores_checked += s.restores_checked;
        total.kinds[0] += s.kinds[0];
        total.kinds[1] += s.kinds[1];
        total.forced_full += s.forced_full;
        total.abandoned += s.abandoned;
        total.after_written += s.after_written;
        total.world.slot_reuses += s.world.slot_reuses;
    }
    eprintln!(
        "full/partial {:?}, crashes {}, abandoned {}, forced full {}, changes after their page \
         was written {}, slot reuses {}",
        total.kinds,
        total.crashes,
        total.abandoned,
        total.forced_full,
        total.after_written,
        total.world.slot_reuses
    );
    assert!(
        total.forced_full > 20 && total.abandoned > 10,
        "too few failed LCPs"
    );
    assert!(total.after_written > 500 && total.world.slot_reuses > 500);
    assert!(
        total.kinds[0] > 100 && total.kinds[1] > 200,
        "full/partial: {:?}",
        total.kinds
    );
    assert!(total.crashes > 50, "crashes: {}", total.crashes);
}

// ---------------------------------------------------------------------------
// Chains, deletes, emptied pages

fn rows_of_page(world: &World, page: u32) -> Vec<RowId> {
    world.store.page_rows(page).collect()
}

fn assert_restores_exactly(disk: &dyn Disk, dir: &Path, world: &World, lcp_id: u64) {
    let (result, pool, store) = restore_fresh(disk, dir, &world.store);
    let restored = result.unwrap().expect("a complete LCP");
    assert_eq!(restored.lcp_id, lcp_id);
    assert_eq!(restored.rows, world.model.len() as u64);
    assert_eq!(contents(&pool, &store), world.model);
    store.check_invariants(&pool);
}

#[test]
fn partial_chain_with_deletes_and_emptied_pages() {
    let disk = SimDisk::new(1);
    let mut rng = Rng(1);
    let mut world = World::new(200, 300);
    let per_page = world.store.slots_per_page() as usize;
    for _ in 0..per_page * 8 {
        world.insert(&mut rng);
    }
    assert_eq!(world.store.page_count(), 8);
    let lcp1 = checkpoint(&disk, &dir(), &mut world, 1, None);
    assert_eq!(lcp1.kind, CheckpointKind::Full);
    assert_eq!(lcp1.pages_written, 8);
    assert_restores_exactly(&disk, &dir(), &world, 1);

    // One row out of page 4, page 2 emptied (and freed: page 4 has room),
    // a var part grown in page 3.
    world.delete(rows_of_page(&world, 4)[7]);
    for row in rows_of_page(&world, 2) {
        world.delete(row);
    }
    let r3 = rows_of_page(&world, 3)[5];
    world.update(&mut rng, r3);
    let mut writer =
        CheckpointWriter::start(&disk, &dir(), start(2, 0), Some(&lcp1), &mut world.store).unwrap();
    assert_eq!(writer.kind(), CheckpointKind::Partial);
    assert_eq!(writer.pages(), [2, 3, 4]);
    while writer.step(&world.pool, &mut world.store, 1).unwrap() == Progress::More {}
    let lcp2 = writer.finish(&disk).unwrap();
    assert_eq!((lcp2.lcps_in_chain, lcp2.full_lcp_id), (2, 1));
    assert_restores_exactly(&disk, &dir(), &world, 2);

    // New rows fill page 4's hole and then a page (page 2's index again).
    for _ in 0..per_page / 2 {
        world.insert(&mut rng);
    }
    assert!(world.store.page_rows(2).next().is_some());
    let lcp3 = checkpoint(&disk, &dir(), &mut world, 3, Some(&lcp2));
    assert_eq!(lcp3.kind, CheckpointKind::Partial);
    assert_restores_exactly(&disk, &dir(), &world, 3);

    // Page 0 emptied, the last page loses all but one row.
    for row in rows_of_page(&world, 0) {
        world.delete(row);
    }
    let last = rows_of_page(&world, 7);
    for &row in &last[1..] {
        world.delete(row);
    }
    let lcp4 = checkpoint(&disk, &dir(), &mut world, 4, Some(&lcp3));
    assert_eq!(
        (lcp4.kind, lcp4.lcps_in_chain),
        (CheckpointKind::Partial, 4)
    );
    assert_restores_exactly(&disk, &dir(), &world, 4);
    let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
    assert_eq!(result.unwrap().unwrap().chain, [4, 3, 2, 1]);

    // An LCP with nothing changed writes no page and still restores.
    let lcp5 = checkpoint(&disk, &dir(), &mut world, 5, Some(&lcp4));
    assert_eq!(
        (lcp5.kind, lcp5.pages_written),
        (CheckpointKind::Partial, 0)
    );
    assert_restores_exactly(&disk, &dir(), &world, 5);
}

#[test]
fn uncommitted_inserts_are_left_out() {
    let disk = SimDisk::new(2);
    let mut rng = Rng(2);
    let mut world = World::new(16, 0);
    for _ in 0..100 {
        world.insert(&mut rng);
    }
    let row = world.store.insert(&mut world.pool, &[9; 16], &[]).unwrap();
    world.store.set_uncommitted(&mut world.pool, row, true);
    let lcp = checkpoint(&disk, &dir(), &mut world, 1, None);
    assert_eq!(lcp.rows_written, 100);
    assert_restores_exactly(&disk, &dir(), &world, 1);
}

// ---------------------------------------------------------------------------
// Full or partial

#[test]
fn full_every_eight_lcps_when_half_the_rows_changed_and_on_a_new_table_version() {
    let disk = SimDisk::new(3);
    let mut rng = Rng(3);
    let mut world = World::new(100, 0);
    let rows = 312 * 10;
    for _ in 0..rows {
        world.insert(&mut rng);
    }
    let mut previous: Option<CompletedLcp> = None;
    let mut kinds = Vec::new();
    for id in 1..=10 {
        let row = world.ids[0];
        world.update(&mut rng, row);
        let lcp = checkpoint(&disk, &dir(), &mut world, id, previous.as_ref());
        kinds.push(lcp.kind);
        previous = Some(lcp);
    }
    let (f, p) = (CheckpointKind::Full, CheckpointKind::Partial);
    assert_eq!(kinds, [f, p, p, p, p, p, p, p, f, p]);
    assert_eq!(FULL_CHECKPOINT_EVERY, 8);

    // More than half of the rows changed: full.
    for &row in &world.store.rows().collect::<Vec<_>>()[..rows / 2 + 1] {
        world.update(&mut rng, row);
    }
    assert_eq!(world.store.changed_rows(), rows as u64 / 2 + 1);
    let lcp = checkpoint(&disk, &dir(), &mut world, 11, previous.as_ref());
    assert_eq!((lcp.kind, lcp.rows_written), (f, rows as u64));
    assert_eq!(
        world.store.changed_rows(),
        0,
        "the LCP wrote every mark off"
    );
    // Half: partial, of those rows.
    for &row in &world.store.rows().collect::<Vec<_>>()[rows / 2..] {
        world.update(&mut rng, row);
    }
    let lcp = checkpoint(&disk, &dir(), &mut world, 12, Some(&lcp));
    assert_eq!((lcp.kind, lcp.rows_written), (p, rows as u64 / 2));
    assert_restores_exactly(&disk, &dir(), &world, 12);
    // A new table version: full.
    let mut next = start(13, 0);
    next.table_version = 2;
    let writer =
        CheckpointWriter::start(&disk, &dir(), next, Some(&lcp), &mut world.store).unwrap();
    assert_eq!(writer.kind(), CheckpointKind::Full);
}

/// Picks `count` distinct committed rows at random.
fn random_rows(rng: &mut Rng, world: &World, count: usize) -> Vec<RowId> {
    let mut ids = world.ids.clone();
    for i in 0..count {
        let j = i + rng.below((ids.len() - i) as u64) as usize;
        ids.swap(i, j);
    }
    ids.truncate(count);
    ids
}

#[test]
fn partial_after_changing_one_percent_of_rows_at_random_is_under_a_tenth_of_a_full() {
    let disk = SimDisk::new(4);
    let mut rng = Rng(4);
    let mut world = World::new(100, 0);
    let rows = 50_000;
    for _ in 0..rows {
        world.insert(&mut rng);
    }
    let full = checkpoint(&disk, &dir(), &mut world, 1, None);
    assert_eq!(
        (full.kind, full.rows_written),
        (CheckpointKind::Full, rows as u64)
    );
    // 1% of the rows, spread at random over the fragment: they touch most
    // pages, but a partial LCP writes only them.
    let changed = random_rows(&mut rng, &world, rows / 100);
    for &row in &changed {
        world.update(&mut rng, row);
    }
    let pages: std::collections::BTreeSet<u32> = changed.iter().map(|&r| row_page(r)).collect();
    let partial = checkpoint(&disk, &dir(), &mut world, 2, Some(&full));
    assert_eq!(partial.kind, CheckpointKind::Partial);
    assert_eq!(partial.rows_written, (rows / 100) as u64);
    assert_eq!(partial.pages_written as usize, pages.len());
    let ratio = partial.data_bytes as f64 / full.data_bytes as f64;
    eprintln!(
        "{rows} rows of 100 bytes: full LCP {} bytes ({} pages); partial after 1% random \
         updates {} bytes ({} of the {} pages visited, {} rows): ratio {ratio:.4}",
        full.data_bytes,
        full.pages_written,
        partial.data_bytes,
        partial.pages_written,
        world.store.page_count(),
        partial.rows_written
    );
    assert!(
        pages.len() * 10 > world.store.page_count() as usize * 9,
        "the changes are spread over most pages"
    );
    assert!(
        partial.data_bytes * 10 < full.data_bytes,
        "partial {} bytes vs full {} bytes",
        partial.data_bytes,
        full.data_bytes
    );
    assert_restores_exactly(&disk, &dir(), &world, 2);
    // Another 1%, with deletes and inserts into the freed slots.
    let victims = random_rows(&mut rng, &world, rows / 200);
    for &row in &victims {
        world.delete(row);
    }
    for _ in 0..rows / 200 {
        world.insert(&mut rng);
    }
    let next = checkpoint(&disk, &dir(), &mut world, 3, Some(&partial));
    assert_eq!(next.kind, CheckpointKind::Partial);
    assert_eq!(next.rows_written, (rows / 200) as u64);
    assert!(next.data_bytes * 10 < full.data_bytes);
    assert_restores_exactly(&disk, &dir(), &world, 3);
}

#[test]
fn a_row_changed_after_its_page_was_written_goes_into_the_next_lcp() {
    let disk = SimDisk::new(13);
    let mut rng = Rng(13);
    let mut world = World::new(60, 50);
    for _ in 0..2000 {
        world.insert(&mut rng);
    }
    let lcp1 = checkpoint(&disk, &dir(), &mut world, 1, None);
    let (a, b) = (rows_of_page(&world, 1)[3], rows_of_page(&world, 3)[9]);
    world.update(&mut rng, a);
    world.update(&mut rng, b);
    let redo_start = world.history.len();
    let mut writer = CheckpointWriter::start(
        &disk,
        &dir(),
        start(2, redo_start as u64),
        Some(&lcp1),
        &mut world.store,
    )
    .unwrap();
    assert_eq!(writer.pages(), [1, 3]);
    writer.step(&world.pool, &mut world.store, 1).unwrap();
    assert!(!world.store.is_changed(a), "written: unmarked");
    assert!(world.store.is_changed(b), "not written yet");
    // After page 1 was written and before page 3 is: both change again.
    world.update(&mut rng, a);
    world.update(&mut rng, b);
    while writer.step(&world.pool, &mut world.store, 1).unwrap() == Progress::More {}
    let lcp2 = writer.finish(&disk).unwrap();
    assert_eq!(lcp2.rows_written, 2);
    assert!(world.store.is_changed(a) && !world.store.is_changed(b));
    // Restored as LCP 2 wrote it, then the redo since its start.
    let (result, mut pool, mut store) = restore_fresh(&disk, &dir(), &world.store);
    let restored = result.unwrap().unwrap();
    assert_ne!(
        store.fixed(&pool, a),
        &world.model[&a].0[..],
        "a as LCP 2 wrote it"
    );
    assert_eq!(
        store.fixed(&pool, b),
        &world.model[&b].0[..],
        "b as LCP 2 wrote it"
    );
    replay(
        &mut pool,
        &mut store,
        &world.history[restored.redo_start.0 as usize..],
    );
    assert_eq!(contents(&pool, &store), world.model);
    // LCP 3 writes a (page 1 changed after LCP 2 began), nothing else.
    let lcp3 = checkpoint(&disk, &dir(), &mut world, 3, Some(&lcp2));
    assert_eq!((lcp3.kind, lcp3.rows_written), (CheckpointKind::Partial, 1));
    assert_eq!(
        lcp3.pages_written, 2,
        "pages 1 and 3 changed after LCP 2 began"
    );
    assert_restores_exactly(&disk, &dir(), &world, 3);
}

#[test]
fn an_abandoned_lcp_forces_a_full_one() {
    let disk = SimDisk::new(14);
    let mut rng = Rng(14);
    let mut world = World::new(80, 0);
    for _ in 0..3000 {
        world.insert(&mut rng);
    }
    let lcp1 = checkpoint(&disk, &dir(), &mut world, 1, None);
    let changed = random_rows(&mut rng, &world, 30);
    for &row in &changed {
        world.update(&mut rng, row);
    }
    // LCP 2 writes every changed row, unmarking them, and is abandoned.
    let mut writer =
        CheckpointWriter::start(&disk, &dir(), start(2, 0), Some(&lcp1), &mut world.store).unwrap();
    assert_eq!(writer.kind(), CheckpointKind::Partial);
    while writer.step(&world.pool, &mut world.store, 4).unwrap() == Progress::More {}
    drop(writer);
    assert_eq!(
        world.store.changed_rows(),
        0,
        "the abandoned LCP unmarked them"
    );
    // A partial LCP on LCP 1 would leave those rows out: the writer makes a
    // full one.
    let lcp3 = checkpoint(&disk, &dir(), &mut world, 3, Some(&lcp1));
    assert_eq!(lcp3.kind, CheckpointKind::Full);
    assert_eq!(lcp3.rows_written, 3000);
    assert_restores_exactly(&disk, &dir(), &world, 3);
    // The same after a failed one.
    world.update(&mut rng, changed[0]);
    let mut writer =
        CheckpointWriter::start(&disk, &dir(), start(4, 0), Some(&lcp3), &mut world.store).unwrap();
    assert_eq!(writer.kind(), CheckpointKind::Partial);
    while writer.step(&world.pool, &mut world.store, 4).unwrap() == Progress::More {}
    disk.fail_next_sync();
    writer.finish(&disk).unwrap_err();
    let lcp5 = checkpoint(&disk, &dir(), &mut world, 5, Some(&lcp3));
    assert_eq!(lcp5.kind, CheckpointKind::Full);
    // After a complete one, partial again (and only on the newest).
    world.update(&mut rng, changed[1]);
    let lcp6 = checkpoint(&disk, &dir(), &mut world, 6, Some(&lcp5));
    assert_eq!((lcp6.kind, lcp6.rows_written), (CheckpointKind::Partial, 1));
    world.update(&mut rng, changed[2]);
    let lcp7 = checkpoint(&disk, &dir(), &mut world, 7, Some(&lcp5));
    assert_eq!(lcp7.kind, CheckpointKind::Full, "LCP 6 ran after LCP 5");
    assert_restores_exactly(&disk, &dir(), &world, 7);
}

#[test]
fn restore_applies_the_chain_with_deletes_and_slot_reuse() {
    let disk = SimDisk::new(15);
    let mut rng = Rng(15);
    let mut world = World::new(50, 120);
    for _ in 0..1500 {
        world.insert(&mut rng);
    }
    let mut snapshots = Vec::new();
    let mut previous = None;
    let mut freed = Vec::new();
    for id in 1..=6 {
        let lcp = checkpoint(&disk, &dir(), &mut world, id, previous.as_ref());
        assert_eq!(lcp.kind == CheckpointKind::Full, id == 1);
        snapshots.push(world.model.clone());
        previous = Some(lcp);
        // Delete some rows, update some, and insert as many rows as were
        // deleted the round before: the allocator puts them into freed
        // slots.
        let victims = random_rows(&mut rng, &world, 40);
        for &row in &victims {
            world.delete(row);
        }
        for &row in &random_rows(&mut rng, &world, 20) {
            world.update(&mut rng, row);
        }
        for _ in 0..freed.len() {
            world.insert(&mut rng);
        }
        freed = victims;
    }
    assert!(
        world.slot_reuses > 100,
        "slot reuses: {}",
        world.slot_reuses
    );
    let lcp7 = checkpoint(&disk, &dir(), &mut world, 7, previous.as_ref());
    snapshots.push(world.model.clone());
    // Every member of the chain restores to the rows it saw.
    for id in (1..=7u64).rev() {
        let (result, pool, store) = restore_fresh(&disk, &dir(), &world.store);
        let restored = result.unwrap().unwrap();
        assert_eq!(restored.lcp_id, id);
        assert_eq!(restored.chain, (1..=id).rev().collect::<Vec<_>>());
        assert_eq!(
            contents(&pool, &store),
            snapshots[id as usize - 1],
            "LCP {id}"
        );
        store.check_invariants(&pool);
        assert_eq!(store.changed_rows(), 0, "restored rows are not changed");
        disk.remove_file(&control_file(id)).unwrap();
    }
    assert_eq!(lcp7.lcps_in_chain, 7);
}

#[test]
fn a_live_slot_that_no_lcp_of_the_chain_holds_is_corrupt() {
    // LCP 2 builds on a full LCP 1 of 600 rows; LCP 1 is then replaced by a
    // well-formed full LCP 1 of 300 rows (another fragment's, say): LCP 2's
    // record of page 3 names live slots whose rows no file holds.
    let make = |rows: usize| {
        let disk = SimDisk::new(16);
        let mut rng = Rng(16);
        let mut world = World::new(200, 0);
        for _ in 0..rows {
            world.insert(&mut rng);
        }
        let lcp1 = checkpoint(&disk, &dir(), &mut world, 1, None);
        (disk, world, lcp1)
    };
    let (disk, mut world, lcp1) = make(600);
    let (other, _, _) = make(300);
    assert!(world.store.page_count() >= 4);
    let row = rows_of_page(&world, 3)[0];
    let mut rng = Rng(17);
    world.update(&mut rng, row);
    checkpoint(&disk, &dir(), &mut world, 2, Some(&lcp1));
    for path in [data_file(1), control_file(1)] {
        let bytes = other.durable_contents(&path).unwrap();
        let mut file = disk.open(&path, OpenMode::CreateTruncate).unwrap();
        file.write_at(0, &bytes).unwrap();
        file.sync().unwrap();
    }
    let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
    let (offset, reason) = expect_corrupt(result, &data_file(2));
    assert!(offset >= 64, "{reason}");
    assert!(
        reason.contains("page 3: slot 1 is live, but no LCP of the chain holds its row"),
        "{reason}"
    );
}

// ---------------------------------------------------------------------------
// Damage

fn data_file(lcp_id: u64) -> PathBuf {
    dir().join(format!("t{TABLE}-f{FRAGMENT}-lcp{lcp_id}.data"))
}

fn control_file(lcp_id: u64) -> PathBuf {
    dir().join(format!("t{TABLE}-f{FRAGMENT}-lcp{lcp_id}.ctl"))
}

/// A chain of a full LCP 1 and partial LCPs 2 and 3, with the world as it
/// was at each.
fn chain_of_three(seed: u64) -> (SimDisk, World, Vec<BTreeMap<RowId, Row>>) {
    let disk = SimDisk::new(seed);
    let mut rng = Rng(seed);
    let mut world = World::new(40, 100);
    for _ in 0..3000 {
        world.insert(&mut rng);
    }
    let mut snapshots = Vec::new();
    let mut previous = None;
    for id in 1..=3 {
        let lcp = checkpoint(&disk, &dir(), &mut world, id, previous.as_ref());
        snapshots.push(world.model.clone());
        previous = Some(lcp);
        for _ in 0..20 {
            let row = rows_of_page(&world, 1)[rng.below(100) as usize];
            world.update(&mut rng, row);
        }
        let row = world.ids[0];
        world.delete(row);
    }
    (disk, world, snapshots)
}

fn expect_corrupt(
    result: Result<Option<RestoredCheckpoint>, CheckpointError>,
    want_file: &Path,
) -> (u64, String) {
    match result {
        Err(CheckpointError::Corrupt {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file, want_file, "{reason}");
            (offset, reason)
        }
        other => panic!(
            "expected Corrupt for {}, got {other:?}",
            want_file.display()
        ),
    }
}

#[test]
fn a_flipped_byte_anywhere_in_the_chain_is_corrupt_with_file_and_offset() {
    let (disk, world, _) = chain_of_three(5);
    let sizes: Vec<u64> = (1..=3)
        .map(|id| disk.durable_contents(&data_file(id)).unwrap().len() as u64)
        .collect();
    let mut rng = Rng(55);
    for (i, &size) in sizes.iter().enumerate() {
        let id = i as u64 + 1;
        let mut spots = vec![0, 10, 63, 64, 70, size - 1, size - 30];
        spots.extend((0..12).map(|_| rng.below(size)));
        for at in spots {
            let (disk, world) = (disk_copy(&disk), &world);
            disk.flip_byte(&data_file(id), at).unwrap();
            let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
            let (offset, reason) = expect_corrupt(result, &data_file(id));
            assert!(
                offset <= at && at - offset < 256 << 10,
                "LCP {id}: flip at {at} reported at {offset}: {reason}"
            );
            let text = CheckpointError::Corrupt {
                file: data_file(id),
                offset,
                reason,
            }
            .to_string();
            assert!(text.contains(&format!("lcp{id}.data is corrupt at offset {offset}")));
        }
    }
}

/// A second disk with the same durable files (flip one, keep the other).
fn disk_copy(from: &SimDisk) -> SimDisk {
    let to = SimDisk::new(0);
    to.create_dir_all(&dir()).unwrap();
    for path in from.list_dir(&dir()).unwrap() {
        let bytes = from.durable_contents(&path).unwrap();
        let mut file = to.open(&path, OpenMode::CreateTruncate).unwrap();
        file.write_at(0, &bytes).unwrap();
        file.sync().unwrap();
    }
    to.sync_dir(&dir()).unwrap();
    to
}

#[test]
fn a_truncated_or_missing_data_file_is_corrupt() {
    let (disk, world, _) = chain_of_three(6);
    for id in 1..=3 {
        let size = disk.durable_contents(&data_file(id)).unwrap().len() as u64;
        for cut in [0, 64, size / 2, size - 1] {
            let disk = disk_copy(&disk);
            disk.truncate(&data_file(id), cut).unwrap();
            let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
            let (offset, reason) = expect_corrupt(result, &data_file(id));
            assert_eq!(offset, cut, "{reason}");
            assert!(reason.contains("truncated"), "{reason}");
        }
        let disk = disk_copy(&disk);
        disk.remove_file(&data_file(id)).unwrap();
        let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
        expect_corrupt(result, &data_file(id));
    }
}

#[test]
fn a_damaged_control_file_inside_the_chain_is_corrupt() {
    let (disk, world, _) = chain_of_three(7);
    for id in [1, 2] {
        let disk = disk_copy(&disk);
        disk.flip_byte(&control_file(id), 20).unwrap();
        let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
        let (_, reason) = expect_corrupt(result, &control_file(id));
        assert!(reason.contains(&format!("builds on LCP {id}")), "{reason}");
    }
}

#[test]
fn a_torn_or_missing_newest_control_file_means_the_previous_lcp() {
    let (disk, world, snapshots) = chain_of_three(8);
    let restored_as = |disk: &SimDisk| {
        let (result, pool, store) = restore_fresh(disk, &dir(), &world.store);
        let restored = result.unwrap().unwrap();
        (restored.lcp_id, contents(&pool, &store))
    };
    let torn = disk_copy(&disk);
    torn.truncate(&control_file(3), 50).unwrap();
    assert_eq!(restored_as(&torn), (2, snapshots[1].clone()));
    let flipped = disk_copy(&disk);
    flipped.flip_byte(&control_file(3), 40).unwrap();
    assert_eq!(restored_as(&flipped), (2, snapshots[1].clone()));
    // Two unfinished: back to the full one.
    let gone = disk_copy(&disk);
    gone.remove_file(&control_file(3)).unwrap();
    gone.remove_file(&control_file(2)).unwrap();
    assert_eq!(restored_as(&gone), (1, snapshots[0].clone()));
    // Nothing complete at all.
    gone.remove_file(&control_file(1)).unwrap();
    let (result, _, _) = restore_fresh(&gone, &dir(), &world.store);
    assert_eq!(result.unwrap(), None);
}

#[test]
fn a_control_file_of_another_format_version_is_refused_not_skipped() {
    let (disk, world, _) = chain_of_three(18);
    // LCP 3's control file, whole but of format version 1.
    let mut bytes = disk.durable_contents(&control_file(3)).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..92]);
    bytes[92..96].copy_from_slice(&crc.to_le_bytes());
    let mut file = disk
        .open(&control_file(3), OpenMode::CreateTruncate)
        .unwrap();
    file.write_at(0, &bytes).unwrap();
    file.sync().unwrap();
    let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
    let (offset, reason) = expect_corrupt(result, &control_file(3));
    assert_eq!(offset, 8);
    assert_eq!(reason, "format version 1, this build reads 2");
}

#[test]
fn an_unfinished_lcp_leaves_the_previous_one() {
    for seed in 0..8 {
        let (disk, mut world, snapshots) = chain_of_three(100 + seed);
        // LCP 4 wrote all its pages and crashed before its control file
        // was renamed into place (the temporary one holds garbage);
        // whatever the crash keeps of it, restore uses LCP 3.
        let mut writer =
            CheckpointWriter::start(&disk, &dir(), start(4, 0), None, &mut world.store).unwrap();
        while writer.step(&world.pool, &mut world.store, 8).unwrap() == Progress::More {}
        drop(writer);
        let temp = dir().join(format!("t{TABLE}-f{FRAGMENT}-lcp4.ctl.tmp"));
        let mut file = disk.open(&temp, OpenMode::CreateTruncate).unwrap();
        file.write_at(0, &[0xA5; 60]).unwrap();
        drop(file);
        disk.crash();
        let (result, pool, store) = restore_fresh(&disk, &dir(), &world.store);
        assert_eq!(result.unwrap().unwrap().lcp_id, 3);
        assert_eq!(contents(&pool, &store), snapshots[2]);
        // LCP 5's data file fsync fails: not complete either.
        let mut writer =
            CheckpointWriter::start(&disk, &dir(), start(5, 0), None, &mut world.store).unwrap();
        while writer.step(&world.pool, &mut world.store, 8).unwrap() == Progress::More {}
        disk.fail_next_sync();
        let err = writer.finish(&disk).unwrap_err();
        assert!(err.to_string().contains("fsync"), "{err}");
        disk.crash();
        let (result, _, _) = restore_fresh(&disk, &dir(), &world.store);
        assert_eq!(result.unwrap().unwrap().lcp_id, 3);
    }
}

#[test]
fn a_row_store_of_another_layout_is_refused() {
    let (disk, _, _) = chain_of_three(9);
    let mut pool = PagePool::new(64);
    let mut other = RowStore::new(40);
    let err = restore(&disk, &dir(), TABLE, FRAGMENT, &mut pool, &mut other).unwrap_err();
    assert!(
        matches!(err, CheckpointError::LayoutMismatch { .. }),
        "{err}"
    );
    // Another fragment has no LCP here.
    let mut store = RowStore::with_var_parts(40);
    let none = restore(&disk, &dir(), TABLE, FRAGMENT + 1, &mut pool, &mut store).unwrap();
    assert_eq!(none, None);
}

#[test]
fn restore_out_of_data_memory_is_a_clear_error() {
    let (disk, _, _) = chain_of_three(10);
    let mut pool = PagePool::new(2);
    let mut store = RowStore::with_var_parts(40);
    let err = restore(&disk, &dir(), TABLE, FRAGMENT, &mut pool, &mut store).unwrap_err();
    assert!(err.to_string().contains("DataMemory exhausted"), "{err}");
}

// ---------------------------------------------------------------------------
// Prune

#[test]
fn prune_keeps_only_the_newest_complete_chain() {
    let disk = SimDisk::new(11);
    let mut rng = Rng(11);
    let mut world = World::new(30, 0);
    for _ in 0..5000 {
        world.insert(&mut rng);
    }
    let mut previous: Option<CompletedLcp> = None;
    for id in (10..=100).step_by(10) {
        let row = world.ids[0];
        world.update(&mut rng, row);
        previous = Some(checkpoint(&disk, &dir(), &mut world, id, previous.as_ref()));
        if id == 60 {
            // A failed attempt between complete LCPs leaves a data file,
            // and makes the next LCP full.
            let writer = CheckpointWriter::start(
                &disk,
                &dir(),
                start(65, 0),
                previous.as_ref(),
                &mut world.store,
            )
            .unwrap();
            drop(writer);
        }
    }
    // An LCP in progress, newer than every complete one.
    let mut writer = CheckpointWriter::start(
        &disk,
        &dir(),
        start(200, 0),
        previous.as_ref(),
        &mut world.store,
    )
    .unwrap();
    writer.step(&world.pool, &mut world.store, 1).unwrap();
    // LCP 70 is full (after the failed attempt), 80 to 100 partial: 10 to
    // 60 and the failed attempt go.
    let removed = prune(&disk, &dir(), TABLE, FRAGMENT).unwrap();
    assert_eq!(removed, 6 * 2 + 1);
    let names: Vec<String> = disk
        .list_dir(&dir())
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "t7-f2-lcp100.ctl",
            "t7-f2-lcp100.data",
            "t7-f2-lcp200.data",
            "t7-f2-lcp70.ctl",
            "t7-f2-lcp70.data",
            "t7-f2-lcp80.ctl",
            "t7-f2-lcp80.data",
            "t7-f2-lcp90.ctl",
            "t7-f2-lcp90.data"
        ]
    );
    assert_eq!(prune(&disk, &dir(), TABLE, FRAGMENT).unwrap(), 0);
    drop(writer);
    assert_restores_exactly(&disk, &dir(), &world, 100);
}

// ---------------------------------------------------------------------------
// Real files

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("skarv-lcp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn real_disk_chain_restores_with_redo_replay() {
    let tmp = TempDir::new("chain");
    let disk = RealDisk;
    let mut rng = Rng(12);
    let mut world = World::new(400, 200);
    for _ in 0..2000 {
        world.insert(&mut rng);
    }
    let mut previous: Option<CompletedLcp> = None;
    let mut redo_start = 0;
    for id in 1..=4 {
        redo_start = world.history.len();
        let mut writer = CheckpointWriter::start(
            &disk,
            &tmp.0,
            start(id, redo_start as u64),
            previous.as_ref(),
            &mut world.store,
        )
        .unwrap();
        let hot = rng.below(u64::from(world.store.page_count())) as u32;
        loop {
            for _ in 0..2 {
                world.random_op(&mut rng, hot, 3000);
            }
            if writer.step(&world.pool, &mut world.store, 2).unwrap() == Progress::Done {
                break;
            }
        }
        previous = Some(writer.finish(&disk).unwrap());
        prune(&disk, &tmp.0, TABLE, FRAGMENT).unwrap();
    }
    for _ in 0..20 {
        world.random_op(&mut rng, 0, 3000);
    }
    let (result, mut pool, mut store) = restore_fresh(&disk, &tmp.0, &world.store);
    let restored = result.unwrap().unwrap();
    assert_eq!(restored.lcp_id, 4);
    assert_eq!(restored.redo_start, Lsn(redo_start as u64));
    replay(&mut pool, &mut store, &world.history[redo_start..]);
    assert_eq!(contents(&pool, &store), world.model);
    // The restored store goes on with a partial LCP.
    let mut writer = CheckpointWriter::start(
        &disk,
        &tmp.0,
        start(5, world.history.len() as u64),
        Some(&restored.completed),
        &mut store,
    )
    .unwrap();
    assert_eq!(writer.kind(), CheckpointKind::Partial);
    while writer.step(&pool, &mut store, 4).unwrap() == Progress::More {}
    writer.finish(&disk).unwrap();
    let (result, pool2, store2) = restore_fresh(&disk, &tmp.0, &store);
    assert_eq!(result.unwrap().unwrap().lcp_id, 5);
    assert_eq!(contents(&pool2, &store2), contents(&pool, &store));
}
