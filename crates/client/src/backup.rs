//! A backup's fragment scans through the native API (docs/operations.md,
//! "How it is taken"): [`Session::backup_fragments`] asks the LDM instance
//! holding each fragment's primary replica to write the fragment's next
//! rows to its own backup file (`BackupFragReq`), all requests sent before
//! any answer is waited for, so the nodes write in parallel.

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

impl Session {
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
        let shared = self.shared();
        let mut sent = Vec::with_capacity(requests.len());
        for r in requests {
            let Some(link) = shared.link_index(r.node) else {
                sent.push(Err(Error::usage(format!(
                    "node {} is not a data node of this cluster",
                    r.node
                ))));
                continue;
            };
            let def = r.table.def();
            let home = shared.placement.home_of(r.partition, def.fully_replicated);
            let instance = u16::try_from(home.ldm_instance).expect("an LDM instance fits");
            let request_id = self.next_request_id();
            let signal = Signal {
                receiver: BlockRef::new(r.node, BlockNumber::LOCAL_DATA_MANAGER, instance),
                sender: self.own_ref(),
                body: SignalBody::BackupFragReq {
                    request_id,
                    backup_id: r.backup_id,
                    table_id: r.table.id(),
                    table_version: r.table.version(),
                    partition: r.partition,
                    rows_max: r.rows_max,
                    flags: r.flags,
                    path: r.path.to_owned(),
                },
            };
            sent.push(
                self.send_request(link, ReqKey::Dict(request_id), false, &signal)
                    .map(|()| request_id),
            );
        }
        sent.into_iter()
            .zip(requests)
            .map(|(sent, r)| {
                let request_id = sent?;
                match self.wait_reply(ReqKey::Dict(request_id))? {
                    SignalBody::BackupFragConf {
                        rows, bytes, done, ..
                    } => Ok(BackupFragProgress { rows, bytes, done }),
                    SignalBody::BackupFragRef { code, message, .. } => {
                        Err(Error::new(code, message))
                    }
                    other => Err(Error::new(
                        proto::error::MALFORMED_REQUEST,
                        format!("a backup scan: {} from data node {}", other.name(), r.node),
                    )),
                }
            })
            .collect()
    }
}
