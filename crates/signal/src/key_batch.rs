//! The entries of `LdmKeyBatchReq` and `LdmKeyConfBatch` (wire version 5).
//!
//! A key batch carries what would be several `LdmKeyReq`s (or
//! `LdmKeyConf`s) between two blocks as one byte list: the entries back to
//! back, each the fields of its single signal in their field encoding
//! (`codec`), so that a batch is one buffer to fill, send and reuse, and
//! its receiver reads each entry's op or result batch where it lies.
//!
//! - request entry: `tx_id` u64, `tc` block ref, `chain` (u32 count, node
//!   ids), `epoch` u64 (wire version 16: not 0 for the ops of a one-phase
//!   commit over two replicas, which the receiver runs as the backup's
//!   `LdmKeyCommitReq` answering the sender), `ops` (u32 length, bytes);
//! - answer entry: `tx_id` u64, `ok_in_order` u32, `results` (u32 length,
//!   bytes).
//!
//! The signal's `count` says how many entries there are; a batch whose
//! entries do not fill its bytes exactly, or are not `count`, is refused
//! whole before any entry is used.

use crate::codec::{Field, Reader};
use crate::ids::{BlockRef, Chain};
use crate::DecodeError;

/// The GSNs of `LdmKeyBatchReq` and `LdmKeyConfBatch`, for their errors.
const KEY_BATCH_REQ_GSN: u16 = 137;
const KEY_CONF_BATCH_GSN: u16 = 138;

/// One request of an `LdmKeyBatchReq`, its op batch borrowed from the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyReqEntry<'a> {
    pub tx_id: u64,
    pub tc: BlockRef,
    pub chain: Chain,
    /// The commit epoch of a one-phase commit's ops (0: an `LdmKeyReq`).
    pub epoch: u64,
    pub ops: &'a [u8],
}

/// One answer of an `LdmKeyConfBatch`, its result batch borrowed from the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyConfEntry<'a> {
    pub tx_id: u64,
    pub ok_in_order: u32,
    pub results: &'a [u8],
}

/// Appends a request entry to `out` (`epoch` 0 but for a one-phase
/// commit's ops passed on to the backup).
pub fn put_key_req(
    out: &mut Vec<u8>,
    tx_id: u64,
    tc: BlockRef,
    chain: &Chain,
    epoch: u64,
    ops: &[u8],
) {
    // tx_id, tc, two counts, the epoch: one growth at most for the entry.
    out.reserve(8 + 4 + 4 + chain.len() + 8 + 4 + ops.len());
    tx_id.put(out);
    tc.put(out);
    chain.put(out);
    epoch.put(out);
    put_bytes(out, ops);
}

/// Appends an answer entry to `out`.
pub fn put_key_conf(out: &mut Vec<u8>, tx_id: u64, ok_in_order: u32, results: &[u8]) {
    out.reserve(8 + 4 + 4 + results.len());
    tx_id.put(out);
    ok_in_order.put(out);
    put_bytes(out, results);
}

/// The request entries of `entries`, checked whole first: `count` of them
/// that fill it exactly.
pub fn key_reqs(entries: &[u8], count: u32) -> Result<Vec<KeyReqEntry<'_>>, DecodeError> {
    read_all(entries, count, KEY_BATCH_REQ_GSN, |reader| {
        Ok(KeyReqEntry {
            tx_id: u64::take(reader)?,
            tc: BlockRef::take(reader)?,
            chain: Chain::take(reader)?,
            epoch: u64::take(reader)?,
            ops: take_bytes(reader)?,
        })
    })
}

/// The answer entries of `entries`, checked as [`key_reqs`] checks.
pub fn key_confs(entries: &[u8], count: u32) -> Result<Vec<KeyConfEntry<'_>>, DecodeError> {
    read_all(entries, count, KEY_CONF_BATCH_GSN, |reader| {
        Ok(KeyConfEntry {
            tx_id: u64::take(reader)?,
            ok_in_order: u32::take(reader)?,
            results: take_bytes(reader)?,
        })
    })
}

fn read_all<'a, T>(
    entries: &'a [u8],
    count: u32,
    gsn: u16,
    mut entry: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut reader = Reader::new(entries);
    // Every entry takes at least 8 bytes: a larger count is a lie.
    let count = count as usize;
    if count > entries.len() / 8 {
        return Err(DecodeError::Truncated {
            needed: count * 8,
            available: entries.len(),
        });
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(entry(&mut reader)?);
    }
    if reader.remaining() != 0 {
        return Err(DecodeError::TrailingBytes {
            gsn,
            bytes: reader.remaining(),
        });
    }
    Ok(out)
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("a batch fits a frame");
    len.put(out);
    out.extend_from_slice(bytes);
}

fn take_bytes<'a>(reader: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    let len = u32::take(reader)? as usize;
    reader.take(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{BlockNumber, NodeId};

    fn node(n: u8) -> NodeId {
        NodeId::new(n).unwrap()
    }

    #[test]
    fn the_gsns_are_the_signals() {
        let req = crate::SignalBody::LdmKeyBatchReq {
            count: 0,
            entries: Vec::new(),
        };
        let conf = crate::SignalBody::LdmKeyConfBatch {
            count: 0,
            entries: Vec::new(),
        };
        assert_eq!(
            (req.gsn(), conf.gsn()),
            (KEY_BATCH_REQ_GSN, KEY_CONF_BATCH_GSN)
        );
    }

    #[test]
    fn entries_read_back_as_written_and_a_wrong_count_or_a_cut_is_refused() {
        let tc = BlockRef::new(node(3), BlockNumber::TRANSACTION_COORDINATOR, 1);
        let mut reqs = Vec::new();
        put_key_req(&mut reqs, 7, tc, &Chain::new(), 0, &[1, 2, 3]);
        let chain: Chain = [node(4), node(5)].into_iter().collect();
        put_key_req(&mut reqs, 1 << 50, tc, &chain, (9 << 32) | 2, &[]);
        let read = key_reqs(&reqs, 2).unwrap();
        assert_eq!(
            read,
            vec![
                KeyReqEntry {
                    tx_id: 7,
                    tc,
                    chain: Chain::new(),
                    epoch: 0,
                    ops: &[1, 2, 3]
                },
                KeyReqEntry {
                    tx_id: 1 << 50,
                    tc,
                    chain: [node(4), node(5)].into_iter().collect(),
                    epoch: (9 << 32) | 2,
                    ops: &[]
                },
            ]
        );
        let mut confs = Vec::new();
        put_key_conf(&mut confs, 9, 2, &[4, 5]);
        put_key_conf(&mut confs, 10, 0, &[6]);
        let read = key_confs(&confs, 2).unwrap();
        assert_eq!(
            read[0],
            KeyConfEntry {
                tx_id: 9,
                ok_in_order: 2,
                results: &[4, 5]
            }
        );
        assert_eq!(
            read[1],
            KeyConfEntry {
                tx_id: 10,
                ok_in_order: 0,
                results: &[6]
            }
        );
        let trailing = DecodeError::TrailingBytes {
            gsn: 138,
            bytes: 17,
        };
        assert_eq!(key_confs(&confs, 1), Err(trailing));
        assert!(matches!(
            key_confs(&confs, 3),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            key_reqs(&reqs[..reqs.len() - 1], 2),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            key_reqs(&reqs, u32::MAX),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
