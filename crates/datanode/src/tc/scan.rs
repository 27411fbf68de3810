//! Scans: the TC side of `TcScanReq` (see `docs/transactions.md`, "Scans").
//!
//! A scan covers every partition of its table, or the one its spec names.
//! The TC sends `LdmScanReq` to the primary LDM (for a committed scan of
//! a fully replicated table: this node's own copy) of at most
//! [`SCAN_PARALLELISM_MAX`] partitions at once and starts the next
//! partition as soon as one is done. Each `LdmScanConf` batch goes on to
//! the client as one `TcScanConf`, unchanged (no copy of the rows). A
//! partition that sent a batch and is not done is *parked*: it sends more
//! only when asked. The client answers every `TcScanConf` that is not
//! `done` with one `TcScanNextReq` when it wants more; the TC then asks
//! every parked partition for its next batch. (So a parked partition is
//! always asked: the `TcScanNextReq` answering its own batch comes after
//! it parked.) A batch from a partition that is done, while others still
//! run, goes on only if it has rows. The last batch of the last partition
//! goes with `done: true` and the scan record is freed.
//!
//! Closing (the client's `close`, a failure, or the end of its
//! transaction) sends `LdmScanNextReq { close }` to every partition not
//! done — parked or with a batch on its way — and frees the record at
//! once; answers that still come for the scan's id are dropped (the TC
//! gives each scan a TC-wide id towards the LDMs for that reason).
//!
//! A scan that locks rows (shared or exclusive) makes the transaction a
//! participant of each LDM instance it reaches, so that its commit or
//! abort releases the locks. A lock wait of a scan times out like that
//! of a key operation: the transaction is aborted (error 266).

use kernel::{Context, Instant};
use proto::error;
use proto::{LockMode, RowBatchReader, RowBatchWriter, ScanSpec, NO_PARTITION};
use signal::{tc_flags, BlockNumber, BlockRef, NodeId, SignalBody};

use super::transaction::{AbortReply, TxState};
use super::TcBlock;

/// Most partitions of one scan asked at once.
pub const SCAN_PARALLELISM_MAX: usize = 16;

/// One partition being scanned.
#[derive(Clone, Copy, Debug)]
struct Part {
    partition: u32,
    node: NodeId,
    instance: u32,
    /// A request is at the LDM; else the partition is parked.
    in_flight: bool,
}

/// A scan record (pooled).
#[derive(Default)]
pub(crate) struct Scan {
    pub(crate) tx_id: u64,
    pub(crate) api: Option<BlockRef>,
    api_scan_id: u32,
    ldm_scan_id: u32,
    spec: Option<ScanSpec>,
    /// Partitions not yet started: `next..end` (indexes into `listed`
    /// when the spec named its partitions).
    next: u32,
    end: u32,
    /// The partitions a scan pruned to several reads (`IN` on the
    /// distribution key); empty: `next..end` are the partitions.
    listed: Vec<u32>,
    parts: Vec<Part>,
    locking: bool,
    /// Its table is fully replicated: a committed scan reads this TC's
    /// node's copy of each partition.
    fully_replicated: bool,
    pub(crate) deadline: Instant,
    /// A pushed join: its children and the root batches being joined.
    pub(crate) pushed: Option<super::pushed::Pushed>,
    /// `tc_flags::RELEASE`: at its end, end its transaction when that
    /// holds nothing else.
    release: bool,
}

impl Scan {
    /// Whether a partition it scans now is on one of `nodes`.
    pub(crate) fn reaches(&self, nodes: &signal::NodeBitmask) -> bool {
        self.parts.iter().any(|p| nodes.contains(p.node))
            || self.pushed.as_ref().is_some_and(|p| p.reaches(nodes))
    }

    /// The client's id of the scan.
    pub(crate) fn api_scan_id(&self) -> u32 {
        self.api_scan_id
    }

    /// The TC-wide id the LDMs know the scan by.
    pub(crate) fn ldm_scan_id(&self) -> u32 {
        self.ldm_scan_id
    }

    /// When the scan times out, if it waits for an LDM.
    pub(crate) fn waiting_deadline(&self) -> Option<Instant> {
        self.parts
            .iter()
            .any(|p| p.in_flight)
            .then_some(self.deadline)
    }
}

impl TcBlock {
    pub(crate) fn scan_ref(
        &self,
        to: BlockRef,
        tx_id: u64,
        scan_id: u32,
        code: u32,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        ctx.send(
            to,
            SignalBody::TcScanRef {
                tx_id,
                scan_id,
                code,
                message,
            },
        );
    }

    pub(crate) fn on_scan_req(
        &mut self,
        from: BlockRef,
        tx_id: u64,
        scan_id: u32,
        flags: u32,
        spec: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        let started = flags & tc_flags::START != 0;
        let tx_slot = if started {
            match self.begin_transaction(from, tx_id) {
                Ok(slot) => slot,
                Err((code, message)) => {
                    return self.scan_ref(from, tx_id, scan_id, code, message, ctx)
                }
            }
        } else {
            match self.by_tx_id.get(&tx_id) {
                Some(&slot) => slot,
                None => {
                    let message = format!(
                        "transaction {tx_id:#x} is not known to {} (never started or ended)",
                        self.me
                    );
                    return self.scan_ref(from, tx_id, scan_id, error::BAD_OPERATION, message, ctx);
                }
            }
        };
        self.transactions.get_mut(tx_slot).last_active = ctx.now();
        let opened = if flags & tc_flags::PUSHED != 0 {
            self.pushed_tree(&spec).and_then(|(root, pushed)| {
                self.open_scan(from, tx_slot, scan_id, &root, Some(pushed), ctx)
            })
        } else {
            self.open_scan(from, tx_slot, scan_id, &spec, None, ctx)
        };
        if opened.is_ok() && flags & tc_flags::RELEASE != 0 {
            // Its end comes with a later signal, never inside open_scan.
            let slot = self.scan_by_api[&(tx_id, scan_id)];
            self.scans.get_mut(slot).release = true;
        }
        if let Err((code, message)) = opened {
            self.scan_ref(from, tx_id, scan_id, code, message, ctx);
            if started {
                // Nothing of the transaction exists anywhere yet.
                self.abort(tx_slot, AbortReply::None, ctx);
            }
        }
    }

    fn open_scan(
        &mut self,
        api: BlockRef,
        tx_slot: u32,
        api_scan_id: u32,
        spec: &[u8],
        pushed: Option<super::pushed::Pushed>,
        ctx: &mut Context<'_>,
    ) -> Result<(), (u32, String)> {
        let tx = self.transactions.get(tx_slot);
        let tx_id = tx.tx_id;
        if !matches!(tx.state, TxState::Idle | TxState::Executing { .. }) {
            return Err((
                error::BAD_OPERATION,
                format!("transaction {tx_id:#x} is committing or aborting"),
            ));
        }
        if self.scan_by_api.contains_key(&(tx_id, api_scan_id)) {
            return Err((
                error::BAD_OPERATION,
                format!("transaction {tx_id:#x} has scan {api_scan_id} open already"),
            ));
        }
        let mut spec = ScanSpec::decode(spec).map_err(|e| (e.code(), e.to_string()))?;
        let Some(table) = self.tables.get(&spec.table_id) else {
            return Err((
                error::NO_SUCH_TABLE,
                format!("no table with id {} on this node", spec.table_id),
            ));
        };
        spec.check(&table.def)
            .map_err(|e| (e.code(), e.to_string()))?;
        let fully_replicated = table.def.fully_replicated;
        // The LDMs are sent one partition each: the list stays here.
        let listed = std::mem::take(&mut spec.partitions);
        let (next, end) = if !listed.is_empty() {
            (0, listed.len() as u32)
        } else if spec.partition == NO_PARTITION {
            (0, table.def.partitions)
        } else {
            (spec.partition, spec.partition + 1)
        };
        let Some(slot) = self.scans.allocate() else {
            self.counters.refused_overload += 1;
            return Err((
                error::TOO_MANY_SCANS,
                format!(
                    "{}: all {} scan records are in use (MaxNoOfConcurrentScans)",
                    self.me, self.config.scans_max
                ),
            ));
        };
        let ldm_scan_id = self.fresh_ldm_scan_id();
        let scan = self.scans.get_mut(slot);
        scan.tx_id = tx_id;
        scan.api = Some(api);
        scan.api_scan_id = api_scan_id;
        scan.ldm_scan_id = ldm_scan_id;
        scan.locking = spec.lock != LockMode::Committed;
        scan.fully_replicated = fully_replicated;
        scan.spec = Some(spec);
        scan.pushed = pushed;
        scan.release = false;
        scan.next = next;
        scan.end = end;
        scan.listed = listed;
        scan.parts.clear();
        self.scan_by_ldm_id.insert(ldm_scan_id, slot);
        self.scan_by_api.insert((tx_id, api_scan_id), slot);
        self.transactions.get_mut(tx_slot).scans += 1;
        while self.scans.get(slot).parts.len() < SCAN_PARALLELISM_MAX
            && self.start_next_partition(slot, ctx)
        {}
        Ok(())
    }

    /// A scan id towards the LDMs that no open scan uses.
    fn fresh_ldm_scan_id(&mut self) -> u32 {
        loop {
            let id = self.next_ldm_scan_id;
            self.next_ldm_scan_id = self.next_ldm_scan_id.wrapping_add(1);
            if !self.scan_by_ldm_id.contains_key(&id) {
                return id;
            }
        }
    }

    /// Sends `LdmScanReq` for the scan's next partition; false if none is left.
    fn start_next_partition(&mut self, slot: u32, ctx: &mut Context<'_>) -> bool {
        let deadline = self.deadline_from(ctx.now());
        let scan = self.scans.get_mut(slot);
        if scan.next >= scan.end {
            return false;
        }
        let partition = match scan.listed.get(scan.next as usize) {
            Some(&p) => p,
            None => scan.next,
        };
        scan.next += 1;
        let home = self.map.home_of(partition, scan.fully_replicated);
        let me = self.config.node;
        // The nearest copy: a serving node holds every partition of a fully
        // replicated table, committed (no lock) as every replica.
        let local = scan.fully_replicated
            && !scan.locking
            && home.is_replica(me)
            && self.map.is_serving(me);
        let node = if local { me } else { home.primary() };
        let instance = home.ldm_instance;
        let spec = scan.spec.as_mut().expect("an open scan has its spec");
        spec.partition = partition;
        let bytes = spec.to_bytes();
        scan.parts.push(Part {
            partition,
            node,
            instance,
            in_flight: true,
        });
        scan.deadline = deadline;
        let (tx_id, ldm_scan_id, locking) = (scan.tx_id, scan.ldm_scan_id, scan.locking);
        if locking {
            if let Some(&tx) = self.by_tx_id.get(&tx_id) {
                self.transactions
                    .get_mut(tx)
                    .add_participant(node, instance, &mut None);
            }
        }
        ctx.send(
            BlockRef::new(node, BlockNumber::LOCAL_DATA_MANAGER, instance as u16),
            SignalBody::LdmScanReq {
                tx_id,
                scan_id: ldm_scan_id,
                spec: bytes,
            },
        );
        self.arm_sweep(ctx);
        true
    }

    pub(crate) fn on_ldm_scan_conf(
        &mut self,
        ldm_scan_id: u32,
        partition: u32,
        rows: Vec<u8>,
        done: bool,
        ctx: &mut Context<'_>,
    ) {
        let Some(&slot) = self.scan_by_ldm_id.get(&ldm_scan_id) else {
            // Closed while this was on its way.
            return;
        };
        let scan = self.scans.get_mut(slot);
        if !scan
            .parts
            .iter()
            .any(|p| p.partition == partition && p.in_flight)
        {
            tracing::warn!(tc = %self.me, "scan {ldm_scan_id}: a batch of partition {partition} not asked for: dropped");
            return;
        };
        if scan.pushed.is_some() {
            // The partition stays in flight until its joined rows go on.
            return self.pushed_batch(slot, partition, rows, done, ctx);
        }
        self.scan_batch_out(slot, partition, rows, done, ctx);
    }

    /// Passes a partition's batch (of a pushed scan: its joined rows) on
    /// to the client, and starts the next partition when it was the last.
    pub(crate) fn scan_batch_out(
        &mut self,
        slot: u32,
        partition: u32,
        rows: Vec<u8>,
        done: bool,
        ctx: &mut Context<'_>,
    ) {
        let scan = self.scans.get_mut(slot);
        let Some(at) = scan
            .parts
            .iter()
            .position(|p| p.partition == partition && p.in_flight)
        else {
            return;
        };
        if done {
            scan.parts.swap_remove(at);
            self.start_next_partition(slot, ctx);
        } else {
            scan.parts[at].in_flight = false;
        }
        let scan = self.scans.get(slot);
        let complete = scan.parts.is_empty() && scan.next >= scan.end;
        let (api, tx_id, scan_id) = (
            scan.api.expect("a scan has a client"),
            scan.tx_id,
            scan.api_scan_id,
        );
        if complete {
            let release = scan.release;
            self.counters.scans_completed += 1;
            self.free_scan(slot);
            let released = release && self.release_if_idle(tx_id);
            ctx.send(
                api,
                SignalBody::TcScanConf {
                    tx_id,
                    scan_id,
                    rows,
                    done: true,
                    released,
                },
            );
            return;
        }
        let has_rows = RowBatchReader::new(&rows).is_ok_and(|r| !r.is_empty());
        if !done || has_rows {
            ctx.send(
                api,
                SignalBody::TcScanConf {
                    tx_id,
                    scan_id,
                    rows,
                    done: false,
                    released: false,
                },
            );
        } else {
            self.scratch.recycle(rows);
        }
    }

    pub(crate) fn on_scan_next(
        &mut self,
        from: BlockRef,
        tx_id: u64,
        scan_id: u32,
        close: bool,
        ctx: &mut Context<'_>,
    ) {
        let Some(&slot) = self.scan_by_api.get(&(tx_id, scan_id)) else {
            let message = format!(
                "transaction {tx_id:#x} has no open scan {scan_id} on {}",
                self.me
            );
            return self.scan_ref(from, tx_id, scan_id, error::UNKNOWN_SCAN, message, ctx);
        };
        if close {
            // Closed early (a LIMIT met), a releasing scan ends its idle
            // transaction as at its end: answers still on their way from
            // the LDMs are dropped by scan id, and a committed read holds
            // nothing there.
            let release = self.scans.get(slot).release;
            self.close_scan(slot, ctx);
            let released = release && self.release_if_idle(tx_id);
            let mut rows = self.scratch.buffer();
            drop(RowBatchWriter::new(&mut rows));
            ctx.send(
                from,
                SignalBody::TcScanConf {
                    tx_id,
                    scan_id,
                    rows,
                    done: true,
                    released,
                },
            );
            return;
        }
        let deadline = self.deadline_from(ctx.now());
        let scan = self.scans.get_mut(slot);
        let ldm_scan_id = scan.ldm_scan_id;
        let mut asked = false;
        for part in scan.parts.iter_mut().filter(|p| !p.in_flight) {
            part.in_flight = true;
            asked = true;
            ctx.send(
                BlockRef::new(
                    part.node,
                    BlockNumber::LOCAL_DATA_MANAGER,
                    part.instance as u16,
                ),
                SignalBody::LdmScanNextReq {
                    tx_id,
                    scan_id: ldm_scan_id,
                    partition: part.partition,
                    close: false,
                },
            );
        }
        if asked {
            scan.deadline = deadline;
            self.arm_sweep(ctx);
        }
    }

    pub(crate) fn on_ldm_scan_ref(
        &mut self,
        ldm_scan_id: u32,
        partition: u32,
        code: u32,
        message: String,
        ctx: &mut Context<'_>,
    ) {
        let Some(&slot) = self.scan_by_ldm_id.get(&ldm_scan_id) else {
            return;
        };
        let scan = self.scans.get_mut(slot);
        // The failed partition's scan is gone at the LDM.
        scan.parts.retain(|p| p.partition != partition);
        let (api, tx_id, scan_id) = (
            scan.api.expect("a scan has a client"),
            scan.tx_id,
            scan.api_scan_id,
        );
        let message = format!("scan of partition {partition}: {message}");
        self.close_scan(slot, ctx);
        self.scan_ref(api, tx_id, scan_id, code, message, ctx);
    }

    /// Closes every scan of a transaction, telling the client why.
    pub(crate) fn close_scans_of(
        &mut self,
        tx_slot: u32,
        code: u32,
        message: &str,
        ctx: &mut Context<'_>,
    ) {
        if self.transactions.get(tx_slot).scans == 0 {
            return;
        }
        let tx_id = self.transactions.get(tx_slot).tx_id;
        let slots: Vec<u32> = self
            .scans
            .used_slots()
            .filter(|&s| self.scans.get(s).tx_id == tx_id)
            .collect();
        for slot in slots {
            let scan = self.scans.get(slot);
            let (api, scan_id) = (scan.api.expect("a scan has a client"), scan.api_scan_id);
            self.close_scan(slot, ctx);
            self.scan_ref(api, tx_id, scan_id, code, message.to_string(), ctx);
        }
        assert_eq!(
            self.transactions.get(tx_slot).scans,
            0,
            "every scan of transaction {tx_id:#x} closed"
        );
    }

    /// Tells every partition not done to close, and frees the record.
    pub(crate) fn close_scan(&mut self, slot: u32, ctx: &mut Context<'_>) {
        let scan = self.scans.get(slot);
        for part in &scan.parts {
            ctx.send(
                BlockRef::new(
                    part.node,
                    BlockNumber::LOCAL_DATA_MANAGER,
                    part.instance as u16,
                ),
                SignalBody::LdmScanNextReq {
                    tx_id: scan.tx_id,
                    scan_id: scan.ldm_scan_id,
                    partition: part.partition,
                    close: true,
                },
            );
        }
        self.free_scan(slot);
    }

    fn free_scan(&mut self, slot: u32) {
        let scan = self.scans.get_mut(slot);
        scan.parts.clear();
        scan.spec = None;
        if let Some(pushed) = scan.pushed.take() {
            for id in pushed.read_ids() {
                self.pushed_by_read.remove(&id);
            }
        }
        let scan = self.scans.get_mut(slot);
        let (tx_id, api_scan_id, ldm_scan_id) = (scan.tx_id, scan.api_scan_id, scan.ldm_scan_id);
        let removed = self.scan_by_ldm_id.remove(&ldm_scan_id);
        assert_eq!(removed, Some(slot), "scan {ldm_scan_id} freed once");
        self.scan_by_api.remove(&(tx_id, api_scan_id));
        if let Some(&tx) = self.by_tx_id.get(&tx_id) {
            let tx = self.transactions.get_mut(tx);
            assert!(tx.scans > 0, "scans of transaction {tx_id:#x} counted");
            tx.scans -= 1;
        }
        self.scans.release(slot);
    }
}
