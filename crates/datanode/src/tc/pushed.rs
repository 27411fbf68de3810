//! Pushed joins in the TC (NDB's SPJ block; `docs/pushed-joins.md`).
//!
//! A `TcScanReq` with `tc_flags::PUSHED` carries a [`QueryTree`]: its root
//! is scanned as any scan (`scan`), and each batch an LDM returns is held
//! back (its partition stays "in flight") while the TC reads the children
//! of its rows by primary key, one child after the other: for child k, one
//! `LdmKeyReq` of committed reads per LDM instance that owns one of the
//! rows (routed by the live map, as key operations are). When the last
//! child is read the joined rows go on to the client as the batch, through
//! the scan's usual path. So the client pays one round trip per batch of
//! root rows, whatever the number of tables.
//!
//! The key reads are no part of the client's transaction: committed reads
//! leave nothing in the LDMs, and they go under a TC-made transaction id
//! (bit [`PUSHED_TX_BIT`] set, which no client id has) that routes their
//! answers here. A read that fails (other than "no such row") fails the
//! scan with its code. A batch waits under the scan's deadline, and a scan
//! whose reads went to a failed node is closed like one whose partition
//! did (`Scan::reaches`).

use kernel::Context;
use proto::error;
use proto::query::{KeySource, QueryChild, QueryTree};
use proto::{
    LockMode, OpBatchWriter, OpHeader, OpKind, ResultReader, RowBatchReader, RowBatchWriter,
    IGNORE_ERROR, NO_INDEX,
};
use schema::{distribution_hash, partition_of, Value};
use signal::{BlockNumber, BlockRef, NodeId, SignalBody};

use super::TcBlock;

/// Set in the transaction id of a pushed join's key reads; client
/// transaction ids use the low 56 bits (`node << 48 | counter`).
pub const PUSHED_TX_BIT: u64 = 1 << 63;
/// Bits of the counter in a pushed join's read id (below the TC instance).
const PUSHED_COUNTER_BITS: u32 = 40;

/// The pushed join of a scan.
#[derive(Default)]
pub(crate) struct Pushed {
    children: Vec<QueryChild>,
    /// Values each node returns, root first.
    widths: Vec<usize>,
    /// Root batches whose children are being read.
    jobs: Vec<Job>,
}

/// One root batch being joined.
struct Job {
    /// The id its key reads go under.
    read_id: u64,
    partition: u32,
    /// The LDM's batch was the partition's last.
    done: bool,
    /// Per root row, per node: its values (None: not found); a row
    /// dropped (an inner child missing) is None as a whole.
    rows: Vec<Option<Vec<Option<Vec<Value>>>>>,
    /// The child being read (1-based node number).
    child: usize,
    /// Its reads not answered yet.
    outstanding: usize,
    /// Nodes its reads went to.
    nodes: Vec<NodeId>,
}

impl Pushed {
    /// Whether a read of one of its batches waits for a node of `nodes`.
    pub(crate) fn reaches(&self, nodes: &signal::NodeBitmask) -> bool {
        self.jobs
            .iter()
            .any(|j| j.outstanding > 0 && j.nodes.iter().any(|n| nodes.contains(*n)))
    }

    /// Forgets the key reads in flight (the scan is closed).
    pub(crate) fn read_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.jobs.iter().map(|j| j.read_id)
    }
}

impl TcBlock {
    /// Decodes and checks a pushed join's tree: the root's scan spec and
    /// the join (kept in the scan record by `open_scan`).
    pub(crate) fn pushed_tree(&self, spec: &[u8]) -> Result<(Vec<u8>, Pushed), (u32, String)> {
        let tree = QueryTree::decode(spec).map_err(|e| (e.code(), e.to_string()))?;
        let lookup = |id: u32| self.tables.get(&id).map(|t| &t.def);
        tree.check(lookup)
            .map_err(|e| (e.code(), format!("pushed join: {e}")))?;
        let widths = tree.widths(lookup);
        Ok((
            tree.root.to_bytes(),
            Pushed {
                children: tree.children,
                widths,
                jobs: Vec::new(),
            },
        ))
    }

    /// A root batch of a pushed scan came: read its children.
    pub(crate) fn pushed_batch(
        &mut self,
        slot: u32,
        partition: u32,
        rows: Vec<u8>,
        done: bool,
        ctx: &mut Context<'_>,
    ) {
        let reader = match RowBatchReader::new(&rows) {
            Ok(r) => r,
            Err(e) => {
                let message = format!("a data node answered with a malformed row batch: {e}");
                return self.pushed_fail(slot, error::MALFORMED_REQUEST, message, ctx);
            }
        };
        let nodes = 1 + self
            .scans
            .get(slot)
            .pushed
            .as_ref()
            .map_or(0, |p| p.children.len());
        let joined = reader
            .iter()
            .map(|row| {
                let mut per_node = vec![None; nodes];
                per_node[0] = Some(row.values().map(|v| v.to_value()).collect());
                Some(per_node)
            })
            .collect();
        self.scratch.recycle(rows);
        let read_id = self.fresh_read_id();
        let pushed = self.pushed_mut(slot);
        pushed.jobs.push(Job {
            read_id,
            partition,
            done,
            rows: joined,
            child: 1,
            outstanding: 0,
            nodes: Vec::new(),
        });
        self.pushed_by_read.insert(read_id, slot);
        self.pushed_advance(slot, read_id, ctx);
    }

    /// The pushed join of scan `slot` (the caller knows it is one).
    fn pushed_mut(&mut self, slot: u32) -> &mut Pushed {
        self.scans
            .get_mut(slot)
            .pushed
            .as_mut()
            .expect("a pushed scan")
    }

    fn fresh_read_id(&mut self) -> u64 {
        let counter = self.next_pushed_read & ((1 << PUSHED_COUNTER_BITS) - 1);
        self.next_pushed_read = self.next_pushed_read.wrapping_add(1);
        PUSHED_TX_BIT
            | (u64::from(self.me.node.get()) << 48)
            | (u64::from(self.me.instance) << PUSHED_COUNTER_BITS)
            | counter
    }

    /// Sends the reads of the job's next child that has any; joins and
    /// passes the batch on when none is left.
    fn pushed_advance(&mut self, slot: u32, read_id: u64, ctx: &mut Context<'_>) {
        loop {
            let scan = self.scans.get_mut(slot);
            let pushed = scan.pushed.as_mut().expect("a pushed scan");
            let Some(j) = pushed.jobs.iter().position(|j| j.read_id == read_id) else {
                return;
            };
            let child_no = pushed.jobs[j].child;
            if child_no > pushed.children.len() {
                let job = pushed.jobs.swap_remove(j);
                self.pushed_by_read.remove(&read_id);
                return self.pushed_done(slot, job, ctx);
            }
            match self.pushed_send(slot, j, child_no, ctx) {
                Ok(0) => {
                    // Nothing to read: every row's child is missing.
                    self.pushed_child_read(slot, j);
                }
                Ok(_) => return,
                Err((code, message)) => return self.pushed_fail(slot, code, message, ctx),
            }
        }
    }

    /// Sends the key reads of child `child_no` of job `j`; how many.
    fn pushed_send(
        &mut self,
        slot: u32,
        j: usize,
        child_no: usize,
        ctx: &mut Context<'_>,
    ) -> Result<usize, (u32, String)> {
        let scan = self.scans.get(slot);
        let pushed = scan.pushed.as_ref().expect("a pushed scan");
        let child = &pushed.children[child_no - 1];
        let parent = usize::from(child.parent);
        let job = &pushed.jobs[j];
        let Some(table) = self.tables.get(&child.table_id) else {
            return Err((
                error::NO_SUCH_TABLE,
                format!("no table with id {} on this node", child.table_id),
            ));
        };
        let full = table.def.fully_replicated;
        let d = table.distribution.column_count();
        // The LDM instances reached, and each read: (instance, row, partition, key).
        let mut groups: Vec<(NodeId, u32)> = Vec::new();
        let mut reads: Vec<(usize, usize, u32, Vec<Value>)> = Vec::new();
        let mut key_bytes = Vec::new();
        for (i, row) in job.rows.iter().enumerate() {
            let Some(Some(from)) = row.as_ref().map(|r| &r[parent]) else {
                continue;
            };
            let key: Vec<Value> = child
                .key
                .iter()
                .map(|source| match source {
                    // Checked against the parent's width; a short row finds nothing.
                    KeySource::Column(at) => {
                        from.get(usize::from(*at)).cloned().unwrap_or(Value::Null)
                    }
                    KeySource::Constant(v) => v.clone(),
                })
                .collect();
            // NULL equals nothing: no row.
            if key.iter().any(|v| matches!(v, Value::Null)) {
                continue;
            }
            key_bytes.clear();
            table
                .distribution
                .encode(&key[..d], &mut key_bytes)
                .map_err(|e| (error::BAD_VALUE, format!("table `{}`: {e}", table.def.name)))?;
            let partition = partition_of(distribution_hash(&key_bytes), table.def.partitions);
            let home = self.map.home_of(partition, full);
            let at = (home.primary(), home.ldm_instance);
            let g = match groups.iter().position(|g| *g == at) {
                Some(g) => g,
                None => {
                    groups.push(at);
                    groups.len() - 1
                }
            };
            reads.push((g, i, partition, key));
        }
        let mut batches = Vec::with_capacity(groups.len());
        for (g, &(node, instance)) in groups.iter().enumerate() {
            let mut ops = self.scratch.buffer();
            let mut writer = OpBatchWriter::new(&mut ops);
            for (_, i, partition, key) in reads.iter().filter(|r| r.0 == g) {
                writer.begin(&OpHeader {
                    op_index: *i as u32,
                    table_id: table.def.id,
                    table_version: table.def.version,
                    index_id: NO_INDEX,
                    partition: *partition,
                    kind: OpKind::Read,
                    lock: LockMode::Committed,
                    flags: IGNORE_ERROR,
                });
                for v in key {
                    writer.key(v.as_ref());
                }
                for &c in &child.projection {
                    writer.project(c);
                }
                writer
                    .end()
                    .map_err(|e| (e.code(), format!("pushed join: {e}")))?;
            }
            drop(writer);
            batches.push((node, instance, ops));
        }
        let sent = reads.len();
        let tc = self.me;
        let read_id = job.read_id;
        let deadline = self.deadline_from(ctx.now());
        let scan = self.scans.get_mut(slot);
        scan.deadline = deadline;
        let job = &mut scan.pushed.as_mut().expect("a pushed scan").jobs[j];
        job.outstanding = sent;
        job.nodes.clear();
        for (node, instance, ops) in batches {
            job.nodes.push(node);
            ctx.send(
                BlockRef::new(node, BlockNumber::LOCAL_DATA_MANAGER, instance as u16),
                SignalBody::LdmKeyReq {
                    tx_id: read_id,
                    tc,
                    chain: signal::Chain::new(),
                    ops,
                },
            );
        }
        if sent > 0 {
            self.arm_sweep(ctx);
        }
        Ok(sent)
    }

    /// Child `job.child` of job `j` is read: drop the rows an inner child
    /// is missing from, go to the next child.
    fn pushed_child_read(&mut self, slot: u32, j: usize) {
        let pushed = self.pushed_mut(slot);
        let job = &mut pushed.jobs[j];
        let child = &pushed.children[job.child - 1];
        if !child.outer {
            for row in &mut job.rows {
                if row.as_ref().is_some_and(|r| r[job.child].is_none()) {
                    *row = None;
                }
            }
        }
        job.child += 1;
    }

    /// An `LdmKeyConf` of a pushed join's reads.
    pub(crate) fn on_pushed_conf(
        &mut self,
        from: BlockRef,
        read_id: u64,
        results: Vec<u8>,
        ctx: &mut Context<'_>,
    ) {
        let Some(&slot) = self.pushed_by_read.get(&read_id) else {
            // Its scan was closed while this was on its way.
            return self.scratch.recycle(results);
        };
        let reader = match ResultReader::new(&results) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(tc = %self.me, "pushed read {read_id:#x} from {from}: {e}");
                let message = format!("a data node answered with a malformed result batch: {e}");
                return self.pushed_fail(slot, error::MALFORMED_REQUEST, message, ctx);
            }
        };
        // The field path, not `pushed_mut`: `self.me` is read below while
        // the job is borrowed.
        let pushed = self
            .scans
            .get_mut(slot)
            .pushed
            .as_mut()
            .expect("a pushed scan");
        let Some(j) = pushed.jobs.iter().position(|j| j.read_id == read_id) else {
            return;
        };
        let job = &mut pushed.jobs[j];
        let child = job.child;
        let mut failure = None;
        for result in reader.iter() {
            let Some(Some(row)) = job.rows.get_mut(result.op_index as usize) else {
                let op = result.op_index;
                tracing::error!(tc = %self.me, "{from} answered pushed read {op} of {read_id:#x}: none such");
                continue;
            };
            job.outstanding = job.outstanding.saturating_sub(1);
            if result.code == 0 && result.has_row {
                row[child] = Some(result.values().map(|v| v.to_value()).collect());
            } else if result.code != 0 && result.code != error::NO_SUCH_ROW && failure.is_none() {
                failure = Some(result.code);
            }
        }
        let outstanding = job.outstanding;
        self.scratch.recycle(results);
        if let Some(code) = failure {
            let message = format!(
                "pushed join, reading child {child}: {}",
                error::message(code)
            );
            return self.pushed_fail(slot, code, message, ctx);
        }
        if outstanding == 0 {
            self.pushed_child_read(slot, j);
            self.pushed_advance(slot, read_id, ctx);
        }
    }

    /// Every child of a job is read: its joined rows go to the client.
    fn pushed_done(&mut self, slot: u32, job: Job, ctx: &mut Context<'_>) {
        let widths = self
            .scans
            .get(slot)
            .pushed
            .as_ref()
            .expect("a pushed scan")
            .widths
            .clone();
        let mut out = self.scratch.buffer();
        {
            let mut writer = RowBatchWriter::new(&mut out);
            for per_node in job.rows.iter().flatten() {
                writer.row();
                let found = per_node
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_some())
                    .fold(0u64, |m, (k, _)| m | (1 << k));
                writer.value(Value::UInt(found).as_ref());
                for (values, &width) in per_node.iter().zip(&widths) {
                    match values {
                        Some(values) => values.iter().for_each(|v| writer.value(v.as_ref())),
                        None => (0..width).for_each(|_| writer.value(Value::Null.as_ref())),
                    }
                }
                if let Err(e) = writer.end_row() {
                    drop(writer);
                    let message = format!(
                        "pushed join: the joined rows of one batch are too large ({e}): \
                         ask for fewer rows per batch"
                    );
                    return self.pushed_fail(slot, error::REQUEST_TOO_LARGE, message, ctx);
                }
            }
        }
        self.scan_batch_out(slot, job.partition, out, job.done, ctx);
    }

    /// Fails a pushed scan: closed, the client told why.
    fn pushed_fail(&mut self, slot: u32, code: u32, message: String, ctx: &mut Context<'_>) {
        let scan = self.scans.get(slot);
        let (api, tx_id, scan_id) = (
            scan.api.expect("a scan has a client"),
            scan.tx_id,
            scan.api_scan_id(),
        );
        self.close_scan(slot, ctx);
        self.scan_ref(api, tx_id, scan_id, code, message, ctx);
    }
}
