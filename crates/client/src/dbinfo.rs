//! ndbinfo through the native API: [`Session::dbinfo`] asks every live data
//! node for one ndbinfo table's rows (`DbinfoScanReq`, NDB's
//! DBINFO_SCANREQ) and merges their answers. A node that is down, or lost
//! while it was asked, is left out: its rows are missing, the others'
//! come (as in NDB, where ndbinfo shows the nodes that answer).

use schema::Value;
use signal::dbinfo::{self, ColumnKind, TableDef};
use signal::{BlockNumber, BlockRef, DbinfoRow, NodeId, Signal, SignalBody};

use crate::session::{ReqKey, Session};
use crate::{Error, Result};

/// One ndbinfo table's rows from the data nodes that answered.
#[derive(Clone, Debug)]
pub struct DbinfoRows {
    /// The table asked for.
    pub table: &'static TableDef,
    /// Each row's values in `table.columns` order: `Value::UInt` for integer
    /// columns, `Value::String` for text columns.
    pub rows: Vec<Vec<Value>>,
    /// The data nodes whose rows are in `rows`, ascending.
    pub nodes: Vec<signal::NodeId>,
}

/// Rows as the data nodes answered them, each with its node.
type NodeRows = Vec<(NodeId, DbinfoRow)>;

impl Session {
    /// The rows of ndbinfo table `table` (`signal::dbinfo::TABLES`) from
    /// every live data node, ordered by node. Fails only on an unknown
    /// table or when no data node answers; a node down or lost while
    /// asked is left out. `cluster_operations` costs a second round:
    /// `cluster_transactions`, for its `client_block_ref`.
    pub fn dbinfo(&self, table: &str) -> Result<DbinfoRows> {
        let def = dbinfo::table(table).ok_or_else(|| {
            Error::new(
                proto::error::NO_SUCH_TABLE,
                format!("no ndbinfo table `{table}`"),
            )
        })?;
        let (mut rows, nodes) = self.dbinfo_rows(def)?;
        if def.name == dbinfo::CLUSTER_OPERATIONS.name {
            // The LDMs do not know the client's block: the TCs' rows,
            // asked after, do (`dbinfo::join_client_block_refs`). Without
            // them the rows keep 0, as their transactions may have ended.
            match self.dbinfo_rows(&dbinfo::CLUSTER_TRANSACTIONS) {
                Ok((transactions, _)) => dbinfo::join_client_block_refs(
                    rows.iter_mut().map(|(_, row)| row),
                    transactions.iter().map(|(_, row)| row),
                ),
                Err(error) => {
                    tracing::info!(%error, "ndbinfo.cluster_operations: no client_block_ref")
                }
            }
        }
        let mut out = DbinfoRows {
            table: def,
            rows: Vec::with_capacity(rows.len()),
            nodes,
        };
        for (node, row) in rows {
            out.rows.push(values_of(def, row).map_err(|message| {
                Error::new(
                    proto::error::MALFORMED_REQUEST,
                    format!("ndbinfo.{} from data node {node}: {message}", def.name),
                )
            })?);
        }
        Ok(out)
    }

    /// Table `def`'s rows as the live data nodes answer them, each with
    /// its node, and the nodes that answered (see [`Session::dbinfo`]).
    fn dbinfo_rows(&self, def: &'static TableDef) -> Result<(NodeRows, Vec<NodeId>)> {
        let mut asked = Vec::new();
        for (link, l) in self.shared().links.iter().enumerate() {
            if !l.is_live() {
                continue;
            }
            let request_id = self.next_request_id();
            let signal = Signal {
                receiver: BlockRef::new(l.node, BlockNumber::MEMBERSHIP, 0),
                sender: self.own_ref(),
                body: SignalBody::DbinfoScanReq {
                    request_id,
                    table: def.name.to_owned(),
                },
            };
            // A link that broke since it was looked at: left out, as down.
            if self
                .send_request(link, ReqKey::Dict(request_id), false, &signal)
                .is_ok()
            {
                asked.push((l.node, request_id));
            }
        }
        if asked.is_empty() {
            return Err(Error::with_context(
                proto::error::CLUSTER_FAILURE,
                format!(
                    "ndbinfo.{}: no data node is connected and started",
                    def.name
                ),
            ));
        }
        let (mut rows, mut nodes) = (Vec::new(), Vec::new());
        let mut last_error = None;
        for (node, request_id) in asked {
            match self.wait_reply(ReqKey::Dict(request_id)) {
                Ok(SignalBody::DbinfoScanConf { rows: answer, .. }) => {
                    rows.extend(answer.into_iter().map(|row| (node, row)));
                    nodes.push(node);
                }
                Ok(SignalBody::DbinfoScanRef { code, message, .. }) => {
                    return Err(Error::new(code, format!("data node {node}: {message}")))
                }
                Ok(other) => {
                    return Err(Error::new(
                        proto::error::MALFORMED_REQUEST,
                        format!("ndbinfo: {} from data node {node}", other.name()),
                    ))
                }
                // Lost with its node, or not answered in time: left out.
                Err(error) => {
                    tracing::info!(%node, %error, "ndbinfo: a data node left out");
                    last_error = Some(error);
                }
            }
        }
        if nodes.is_empty() {
            return Err(last_error.expect("every node asked failed"));
        }
        Ok((rows, nodes))
    }
}

/// A row's values in column order, checked against the table's layout.
fn values_of(def: &TableDef, row: DbinfoRow) -> std::result::Result<Vec<Value>, String> {
    let ints_want = def.count(ColumnKind::Int);
    let texts_want = def.count(ColumnKind::Text);
    if row.ints.len() != ints_want || row.texts.len() != texts_want {
        return Err(format!(
            "a row of {} integers and {} texts, not {ints_want} and {texts_want}",
            row.ints.len(),
            row.texts.len()
        ));
    }
    let mut ints = row.ints.into_iter();
    let mut texts = row.texts.into_iter();
    Ok(def
        .columns
        .iter()
        .map(|(_, kind)| match kind {
            ColumnKind::Int => Value::UInt(ints.next().expect("counted")),
            ColumnKind::Text => Value::String(texts.next().expect("counted")),
        })
        .collect())
}
