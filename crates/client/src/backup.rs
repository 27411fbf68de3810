//! A backup's work on the data nodes through the native API
//! (docs/operations.md, "How it is taken"): [`Session::backup_fragments`]
//! asks the LDM instance holding each fragment's primary replica to write
//! the fragment's next rows to its own backup file (`BackupFragReq`), and
//! [`Session::backup_logs`] each LDM instance to start, report or complete
//! its part of the backup's log (`BackupLogReq`); all requests of a call
//! are sent before any answer is waited for, so the nodes work in
//! parallel.

use signal::{BlockNumber, BlockRef, NodeId, Signal, SignalBody};

use crate::session::{ReqKey, Session};
use crate::{Error, Result, Table};

/// One step of one fragment's backup scan.
#[derive(Clone, Copy, Debug)]
pub struct BackupFragRequest<'a> {
    /// The backup's id (`BACKUP-<id>`).
    pub backup_id: u32,
    /// The table, at the version the backup holds.
    pub table: &'a Table,
    /// The fragment's partition.
    pub partition: u32,
    /// The node the scan runs on: the partition's primary when it started
    /// ([`Session::primary_node`]); the same node for every step.
    pub node: NodeId,
    /// Rows to write at most (1..=`signal::backup_frag::ROWS_MAX`).
    pub rows_max: u32,
    /// `signal::backup_frag::START` on the first step, `CLOSE` to end it
    /// early; 0 otherwise.
    pub flags: u32,
    /// The data file, an absolute path on that node's host.
    pub path: &'a str,
}

/// What a fragment's scan has written so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupFragProgress {
    /// Rows written so far.
    pub rows: u64,
    /// The file's length.
    pub bytes: u64,
    /// The fragment's last row is written and the file synced.
    pub done: bool,
}

/// A request to the backup log of one LDM instance.
#[derive(Clone, Copy, Debug)]
pub struct BackupLogRequest<'a> {
    /// The backup's id (`BACKUP-<id>`).
    pub backup_id: u32,
    /// The data node.
    pub node: NodeId,
    /// Its LDM instance (`0..Session::ldm_instances()`).
    pub instance: u32,
    /// `signal::backup_log::START` (with `tables` and `path`), `STOP`
    /// (with `stop_epoch`), `CLOSE`, or 0: how far it is.
    pub flags: u32,
    /// The backup's stop epoch, on `STOP`.
    pub stop_epoch: u64,
    /// The tables logged (ids), on `START`.
    pub tables: &'a [u32],
    /// The log file, an absolute path on that node's host, on `START`.
    pub path: &'a str,
}

/// What a backup log has written so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupLogProgress {
    /// Changes logged.
    pub records: u64,
    /// The file's length.
    pub bytes: u64,
    /// On `START`: the highest epoch committed on the instance then; on
    /// the stop: the stop epoch; else the highest complete epoch.
    pub epoch: u64,
    /// Complete up to the stop epoch and synced.
    pub done: bool,
}

impl Session {
    /// The data nodes this API node is connected to, ascending.
    pub fn live_data_nodes(&self) -> Vec<NodeId> {
        let shared = self.shared();
        let mut nodes: Vec<NodeId> = shared
            .links
            .iter()
            .filter(|l| l.is_live())
            .map(|l| l.node)
            .collect();
        nodes.sort_unstable();
        nodes
    }

    /// LDM instances per data node.
    pub fn ldm_instances(&self) -> u32 {
        self.shared().placement.ldm_instances()
    }

    /// Sends every request, then waits for every answer, in order (see
    /// [`Session::backup_fragments`]).
    pub fn backup_logs(&self, requests: &[BackupLogRequest<'_>]) -> Vec<Result<BackupLogProgress>> {
        let signals = requests.iter().map(|r| {
            let instance = u16::try_from(r.instance).expect("an LDM instance fits");
            let receiver = BlockRef::new(r.node, BlockNumber::LOCAL_DATA_MANAGER, instance);
            let body = |request_id| SignalBody::BackupLogReq {
                request_id,
                backup_id: r.backup_id,
                flags: r.flags,
                stop_epoch: r.stop_epoch,
                tables: r.tables.to_vec(),
                path: r.path.to_owned(),
            };
            (receiver, body)
        });
        self.ask_all(signals)
            .into_iter()
            .zip(requests)
            .map(|(answer, r)| match answer? {
                SignalBody::BackupLogConf {
                    records,
                    bytes,
                    epoch,
                    done,
                    ..
                } => Ok(BackupLogProgress {
                    records,
                    bytes,
                    epoch,
                    done,
                }),
                SignalBody::BackupLogRef { code, message, .. } => Err(Error::new(code, message)),
                other => Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!("a backup log: {} from data node {}", other.name(), r.node),
                )),
            })
            .collect()
    }

    /// Sends a request to each receiver (the body made with its request
    /// id), then waits for each answer, in order.
    fn ask_all<F: Fn(u32) -> SignalBody>(
        &self,
        requests: impl Iterator<Item = (BlockRef, F)>,
    ) -> Vec<Result<SignalBody>> {
        let shared = self.shared();
        let mut sent = Vec::new();
        for (receiver, body) in requests {
            let Some(link) = shared.link_index(receiver.node) else {
                sent.push(Err(Error::usage(format!(
                    "node {} is not a data node of this cluster",
                    receiver.node
                ))));
                continue;
            };
            let request_id = self.next_request_id();
            let signal = Signal {
                receiver,
                sender: self.own_ref(),
                body: body(request_id),
            };
            sent.push(
                self.send_request(link, ReqKey::Dict(request_id), false, &signal)
                    .map(|()| request_id),
            );
        }
        sent.into_iter()
            .map(|sent| self.wait_reply(ReqKey::Dict(sent?)))
            .collect()
    }

    /// The data node serving `partition` of `table` as its primary now (its
    /// first replica this API node is connected to, as the data nodes route
    /// once a failed node left their view); `None` when no replica is.
    pub fn primary_node(&self, table: &Table, partition: u32) -> Option<NodeId> {
        let shared = self.shared();
        let home = shared
            .placement
            .home_of(partition, table.def().fully_replicated);
        let primary = home.replicas().find(|&node| {
            shared
                .link_index(node)
                .is_some_and(|link| shared.links[link].is_live())
        });
        primary
    }

    /// Sends every request, then waits for every answer, in order. A node
    /// lost while asked answers with its error (4010, or 4012 after the
    /// request timeout).
    pub fn backup_fragments(
        &self,
        requests: &[BackupFragRequest<'_>],
    ) -> Vec<Result<BackupFragProgress>> {
        let placement = &self.shared().placement;
        let signals = requests.iter().map(|r| {
            let home = placement.home_of(r.partition, r.table.def().fully_replicated);
            let instance = u16::try_from(home.ldm_instance).expect("an LDM instance fits");
            let receiver = BlockRef::new(r.node, BlockNumber::LOCAL_DATA_MANAGER, instance);
            let body = |request_id| SignalBody::BackupFragReq {
                request_id,
                backup_id: r.backup_id,
                table_id: r.table.id(),
                table_version: r.table.version(),
                partition: r.partition,
                rows_max: r.rows_max,
                flags: r.flags,
                path: r.path.to_owned(),
            };
            (receiver, body)
        });
        self.ask_all(signals)
            .into_iter()
            .zip(requests)
            .map(|(answer, r)| match answer? {
                SignalBody::BackupFragConf {
                    rows, bytes, done, ..
                } => Ok(BackupFragProgress { rows, bytes, done }),
                SignalBody::BackupFragRef { code, message, .. } => Err(Error::new(code, message)),
                other => Err(Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!("a backup scan: {} from data node {}", other.name(), r.node),
                )),
            })
            .collect()
    }
}
