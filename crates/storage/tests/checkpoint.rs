//! Local checkpoints against a model: random inserts, updates and deletes
//! interleaved with checkpoint steps, crashes at random points (simulated
//! disk), then restore. What must hold: the restored rows plus every
//! change made since the restored LCP started, re-applied as idempotent
//! upserts and deletes by row id (what redo replay does), equal the rows
//! the store held; pages the LCP wrote hold exactly what they held when
//! written; damage is refused with the file and offset; an unfinished LCP
//! is ignored; a partial LCP writes little when little changed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use storage::checkpoint::{
    prune, restore, CheckpointError, CheckpointKind, CheckpointWriter, CompletedLcp, LcpStart,
    Progress, RestoredCheckpoint, FULL_CHECKPOINT_EVERY,
};
use storage::disk::{Disk, OpenMode, RealDisk, SimDisk};
use storage::memory::{PagePool, RowStore};
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
    while writer.step(&world.pool, &world.store, 3).unwrap() == Progress::More {}
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
            (Some((fixed, var)), false) => store.insert_at(pool, *row, fixed, var).unwrap(),
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
        }
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
        self.kinds[usize::from(writer.kind() == CheckpointKind::Partial)] += 1;
        let mut written = BTreeMap::new();
        let in_use = loop {
            let ops = self.rng.below(8);
            self.ops(ops, hot_page);
            if self.rng.chance(3) {
                return true;
            }
            let before = writer.pages_written();
            let pages_max = 1 + self.rng.below(4) as usize;
            let progress = writer
                .step(&self.world.pool, &self.world.store, pages_max)
                .unwrap();
            for &page in &writer.pages()[before..writer.pages_written()] {
                written.insert(page, self.world.page_image(page));
            }
            if progress == Progress::Done {
                break self.world.pages_in_use();
            }
        };
        let ops = self.rng.below(4);
        self.ops(ops, hot_page);
        if self.rng.chance(8) {
            // The data file's fsync fails: the LCP is not complete, and the
            // next one builds on the previous complete one.
            self.disk.fail_next_sync();
            assert!(matches!(
                writer.finish(&self.disk),
                Err(CheckpointError::Io { op: "fsync", .. })
            ));
            return false;
        }
        let completed = writer.finish(&self.disk).unwrap();
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
    }
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
    while writer.step(&world.pool, &world.store, 1).unwrap() == Progress::More {}
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
fn full_every_eight_lcps_when_half_changed_and_on_a_new_table_version() {
    let disk = SimDisk::new(3);
    let mut rng = Rng(3);
    let mut world = World::new(100, 0);
    for _ in 0..312 * 10 {
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

    // Six of ten pages changed: full.
    for page in 0..6 {
        let row = rows_of_page(&world, page)[0];
        world.update(&mut rng, row);
    }
    let lcp = checkpoint(&disk, &dir(), &mut world, 11, previous.as_ref());
    assert_eq!(lcp.kind, CheckpointKind::Full);
    // Five of ten: partial.
    for page in 0..5 {
        let row = rows_of_page(&world, page)[0];
        world.update(&mut rng, row);
    }
    let lcp = checkpoint(&disk, &dir(), &mut world, 12, Some(&lcp));
    assert_eq!(lcp.kind, CheckpointKind::Partial);
    // A new table version: full.
    let mut next = start(13, 0);
    next.table_version = 2;
    let writer =
        CheckpointWriter::start(&disk, &dir(), next, Some(&lcp), &mut world.store).unwrap();
    assert_eq!(writer.kind(), CheckpointKind::Full);
}

#[test]
fn partial_after_changing_one_percent_of_rows_is_much_smaller() {
    let disk = SimDisk::new(4);
    let mut rng = Rng(4);
    let mut world = World::new(100, 0);
    let rows = 50_000;
    for _ in 0..rows {
        world.insert(&mut rng);
    }
    let full = checkpoint(&disk, &dir(), &mut world, 1, None);
    assert_eq!(full.kind, CheckpointKind::Full);
    // 1% of the rows, the ones of a row id range (recent inserts, a hot
    // key range): partial LCPs are page-granular.
    let all: Vec<RowId> = world.store.rows().collect();
    for &row in &all[20_000..20_000 + rows / 100] {
        world.update(&mut rng, row);
    }
    let partial = checkpoint(&disk, &dir(), &mut world, 2, Some(&full));
    assert_eq!(partial.kind, CheckpointKind::Partial);
    eprintln!(
        "{rows} rows of 100 bytes: full LCP {} bytes, partial after 1% clustered updates {} bytes \
         ({} pages)",
        full.data_bytes, partial.data_bytes, partial.pages_written
    );
    assert!(
        partial.data_bytes * 20 < full.data_bytes,
        "partial {} bytes vs full {} bytes",
        partial.data_bytes,
        full.data_bytes
    );
    assert_restores_exactly(&disk, &dir(), &world, 2);
    // 1% spread at random touches most pages: the LCP is full, at the size
    // of a full one.
    for _ in 0..rows / 100 {
        let row = world.ids[rng.below(world.ids.len() as u64) as usize];
        world.update(&mut rng, row);
    }
    let spread = checkpoint(&disk, &dir(), &mut world, 3, Some(&partial));
    eprintln!(
        "after 1% random updates: {:?} LCP of {} pages, {} bytes",
        spread.kind, spread.pages_written, spread.data_bytes
    );
    assert_eq!(spread.kind, CheckpointKind::Full);
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
fn an_unfinished_lcp_leaves_the_previous_one() {
    for seed in 0..8 {
        let (disk, mut world, snapshots) = chain_of_three(100 + seed);
        // LCP 4 wrote all its pages and crashed before its control file
        // was renamed into place (the temporary one holds garbage);
        // whatever the crash keeps of it, restore uses LCP 3.
        let mut writer =
            CheckpointWriter::start(&disk, &dir(), start(4, 0), None, &mut world.store).unwrap();
        while writer.step(&world.pool, &world.store, 8).unwrap() == Progress::More {}
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
        while writer.step(&world.pool, &world.store, 8).unwrap() == Progress::More {}
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
            // A failed attempt between complete LCPs leaves a data file.
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
    writer.step(&world.pool, &world.store, 1).unwrap();
    // LCP 90 is full (every eighth), 100 partial: 10 to 80 and the failed
    // attempt go.
    let removed = prune(&disk, &dir(), TABLE, FRAGMENT).unwrap();
    assert_eq!(removed, 8 * 2 + 1);
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
            if writer.step(&world.pool, &world.store, 2).unwrap() == Progress::Done {
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
    while writer.step(&pool, &store, 4).unwrap() == Progress::More {}
    writer.finish(&disk).unwrap();
    let (result, pool2, store2) = restore_fresh(&disk, &tmp.0, &store);
    assert_eq!(result.unwrap().unwrap().lcp_id, 5);
    assert_eq!(contents(&pool2, &store2), contents(&pool, &store));
}
