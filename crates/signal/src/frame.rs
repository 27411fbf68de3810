//! Frames: the unit written to and read from a socket.
//!
//! ```text
//! frame header (16 bytes, little-endian)
//!   0  2  magic "SK"
//!   2  1  wire version (WIRE_VERSION)
//!   3  1  flags (must be 0)
//!   4  2  signal count (≥ 1)
//!   6  2  reserved (must be 0)
//!   8  4  payload length in bytes (≤ FRAME_PAYLOAD_MAX_BYTES)
//!  12  4  CRC32C of header bytes 0..12 followed by the payload
//! payload: `signal count` signals, back to back
//! signal header (16 bytes)
//!   0  2  GSN
//!   2  2  flags (must be 0)
//!   4  4  body length in bytes
//!   8  4  receiver: node u8, block u8, instance u16
//!  12  4  sender:   node u8, block u8, instance u16
//! body: the signal's fields in declaration order (see `codec`)
//! ```
//!
//! A frame is checked whole (header, length, checksum) before any signal in
//! it is decoded, and each signal must consume its body exactly.

use crate::codec::{Field, Reader};
use crate::ids::{BlockNumber, BlockRef, NodeId};
use crate::signals::{Signal, SignalBody};
use crate::DecodeError;

pub const MAGIC: [u8; 2] = *b"SK";
/// The layout of the signals' bodies; a frame of another version is refused
/// whole. 2: 64-bit epochs in `TcKeyConf` and the GCP switch signals.
/// 3: `LdmKeyConf::ok_in_order`. 4: `LdmCommitBatchReq`,
/// `LdmCommitBatchConf` and `GcpHurryReq`. 5: `LdmKeyCommitReq` and
/// `LdmKeyCommitted` (one-phase commit), `LdmKeyBatchReq` and
/// `LdmKeyConfBatch` (key batches between nodes). 6: `LdmReadReq` (reads
/// answered by the LDM). 7: cluster incarnations in `TcKeyConf`,
/// `TcWaitGciReq`, the GCP switch and the sysfile signals; `TcWaitGciRef`.
/// 8: no signal changed, but `utf8mb4_general_ci` strings take MySQL's
/// weights in keys, so their key bytes and partitions differ from a build
/// of 7's, which must not share a cluster with this one. 9:
/// `TcScanConf::released` and `tc_flags::RELEASE`. 10: the commit requests
/// to the LDM carry the whole epoch, and the change stream's `Sub*`
/// signals. 11: `SubEpochData::bucket` (the change stream through node
/// failures). 12: the `Dbinfo*` signals (ndbinfo). 13: schema entries in the change
/// stream (`sub_change::ALTER`, `sub_change::DROP`). 14:
/// `SchemaLoadReq::cluster_schema` (a restart waits for the cluster's
/// schema before it copies); `GcpStartConf::epoch`, `previous_epoch`.
/// 15: `SubHolderReq`, `SubHolderConf`, `SubHandbackConf` (the change
/// stream's take-over with three or more replicas, and hand-back). 16:
/// `LdmKeyCommitReq::chain` and `answer`, `LdmOutcomeReq` (the one-phase
/// commit over two replicas). 17: `BackupFragReq`, `BackupFragConf`,
/// `BackupFragRef`, `BackupLogReq`, `BackupLogConf`, `BackupLogRef`
/// (each data node writes its share of a backup, rows and log). 18:
/// `SubStartConf::incarnation`, `SubIncarnationRep`, `SubLostRef` (the
/// change stream through a whole-cluster restart). 19: the change
/// stream's `sub_change::REPLACE` entry and `TableDef` format 4 (its
/// replaced table: a copying ALTER followed). 20: the op flags `NO_WAIT`
/// and `SKIP_LOCKED` and a scan spec's lock wait (`FOR UPDATE NOWAIT`,
/// `SKIP LOCKED`), error `LOCK_BUSY`. 21: a scan spec's distinct prefix
/// (scan spec format 2, a loose index scan). 22: a counting scan (scan
/// spec format 3, its byte of more flags). 23: an aggregating scan (scan
/// spec format 4: aggregates and group columns).
pub const WIRE_VERSION: u8 = 23;
pub const FRAME_HEADER_BYTES: usize = 16;
pub const SIGNAL_HEADER_BYTES: usize = 16;
/// Large enough for a configuration file of 255 nodes, small enough that a
/// receive buffer per connection stays cheap.
pub const FRAME_PAYLOAD_MAX_BYTES: usize = 1 << 20;
pub const FRAME_SIGNALS_MAX: usize = u16::MAX as usize;

/// The largest single encoded frame, header included.
pub const FRAME_MAX_BYTES: usize = FRAME_HEADER_BYTES + FRAME_PAYLOAD_MAX_BYTES;

/// A signal that does not fit the frame being built.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("frame is full ({signals} signals, {bytes} payload bytes)")]
    FrameFull { signals: usize, bytes: usize },
    #[error(
        "signal {name} is {bytes} bytes, more than a frame can carry ({FRAME_PAYLOAD_MAX_BYTES})"
    )]
    SignalTooLarge { name: &'static str, bytes: usize },
}

/// Appends one frame to a buffer, signal by signal.
pub struct FrameWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    signals: usize,
}

impl<'a> FrameWriter<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> FrameWriter<'a> {
        let start = out.len();
        out.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
        FrameWriter {
            out,
            start,
            signals: 0,
        }
    }

    pub fn signal_count(&self) -> usize {
        self.signals
    }

    pub fn payload_bytes(&self) -> usize {
        self.out.len() - self.start - FRAME_HEADER_BYTES
    }

    /// Appends `signal`; on error the buffer is as it was before the call.
    pub fn push(&mut self, signal: &Signal) -> Result<(), EncodeError> {
        if self.signals == FRAME_SIGNALS_MAX {
            return Err(self.full());
        }
        let before = self.out.len();
        encode_signal(signal, self.out);
        let signal_bytes = self.out.len() - before;
        if self.payload_bytes() > FRAME_PAYLOAD_MAX_BYTES {
            self.out.truncate(before);
            if signal_bytes > FRAME_PAYLOAD_MAX_BYTES {
                return Err(EncodeError::SignalTooLarge {
                    name: signal.body.name(),
                    bytes: signal_bytes,
                });
            }
            return Err(self.full());
        }
        self.signals += 1;
        Ok(())
    }

    fn full(&self) -> EncodeError {
        EncodeError::FrameFull {
            signals: self.signals,
            bytes: self.payload_bytes(),
        }
    }

    /// Writes the header. An empty frame is removed again; returns the frame's bytes.
    pub fn finish(self) -> usize {
        if self.signals == 0 {
            self.out.truncate(self.start);
            return 0;
        }
        seal_frame(&mut self.out[self.start..], self.signals);
        self.out.len() - self.start
    }
}

/// Fills in the header of one frame: `frame` is a `FRAME_HEADER_BYTES`
/// placeholder followed by `signals` encoded signals (see [`encode_signal`]).
/// For writers that keep a frame open across calls, as the transport does.
pub fn seal_frame(frame: &mut [u8], signals: usize) {
    assert!(
        (1..=FRAME_SIGNALS_MAX).contains(&signals),
        "a frame holds 1..=65535 signals"
    );
    let payload_len = frame.len() - FRAME_HEADER_BYTES;
    assert!(
        payload_len <= FRAME_PAYLOAD_MAX_BYTES,
        "frame payload over the limit"
    );
    let header = &mut frame[..FRAME_HEADER_BYTES];
    header[0..2].copy_from_slice(&MAGIC);
    header[2] = WIRE_VERSION;
    header[3] = 0;
    header[4..6].copy_from_slice(&(signals as u16).to_le_bytes());
    header[6..8].copy_from_slice(&[0, 0]);
    header[8..12].copy_from_slice(&(payload_len as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&frame[0..12]), &frame[FRAME_HEADER_BYTES..]);
    frame[12..16].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes `signals` as one frame appended to `out` (convenience for control paths).
pub fn encode_frame(signals: &[Signal], out: &mut Vec<u8>) -> Result<usize, EncodeError> {
    let mut writer = FrameWriter::new(out);
    for signal in signals {
        writer.push(signal)?;
    }
    Ok(writer.finish())
}

fn ref_bytes(r: BlockRef) -> [u8; 4] {
    let [lo, hi] = r.instance.to_le_bytes();
    [r.node.get(), r.block.0, lo, hi]
}

/// Appends one signal (header and body) to `out`; frames are made of these.
pub fn encode_signal(signal: &Signal, out: &mut Vec<u8>) {
    let start = out.len();
    // The header in one write (its body length is filled in below).
    let mut header = [0u8; SIGNAL_HEADER_BYTES];
    header[0..2].copy_from_slice(&signal.body.gsn().to_le_bytes());
    header[8..12].copy_from_slice(&ref_bytes(signal.receiver));
    header[12..16].copy_from_slice(&ref_bytes(signal.sender));
    out.extend_from_slice(&header);
    signal.body.encode_fields(out);
    let body_len = out.len() - start - SIGNAL_HEADER_BYTES;
    out[start + 4..start + 8].copy_from_slice(&(body_len as u32).to_le_bytes());
}

/// A whole, checksum-verified frame inside a receive buffer.
#[derive(Debug)]
pub struct FrameRef<'a> {
    signal_count: usize,
    payload: &'a [u8],
}

impl<'a> FrameRef<'a> {
    pub fn signal_count(&self) -> usize {
        self.signal_count
    }

    /// Decodes the signals one by one; stops at the first error.
    pub fn signals(&self) -> SignalIter<'a> {
        SignalIter {
            reader: Reader::new(self.payload),
            left: self.signal_count,
            index: 0,
        }
    }
}

/// Checks the header of a frame that starts at `buf[0]`. Needs only
/// `FRAME_HEADER_BYTES`, so a bad header is refused before its payload arrives.
/// Returns the payload length.
pub fn check_header(buf: &[u8]) -> Result<usize, DecodeError> {
    assert!(buf.len() >= FRAME_HEADER_BYTES);
    if buf[0..2] != MAGIC {
        return Err(DecodeError::BadMagic([buf[0], buf[1]]));
    }
    if buf[2] != WIRE_VERSION {
        return Err(DecodeError::UnsupportedVersion(buf[2]));
    }
    if buf[3] != 0 || buf[6..8] != [0, 0] {
        return Err(DecodeError::BadValue {
            field: "frame flags",
            value: u64::from(buf[3]),
        });
    }
    let count = u16::from_le_bytes([buf[4], buf[5]]) as usize;
    if count == 0 {
        return Err(DecodeError::BadValue {
            field: "frame signal count",
            value: 0,
        });
    }
    let payload_len = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if payload_len > FRAME_PAYLOAD_MAX_BYTES {
        return Err(DecodeError::FrameTooLarge {
            bytes: payload_len,
            max: FRAME_PAYLOAD_MAX_BYTES,
        });
    }
    if payload_len < count * SIGNAL_HEADER_BYTES {
        return Err(DecodeError::BadValue {
            field: "frame payload length",
            value: payload_len as u64,
        });
    }
    Ok(payload_len)
}

/// Decodes the frame at the start of `buf`. `Ok(None)` means more bytes are
/// needed; `Ok(Some((frame, n)))` means the first `n` bytes were one valid frame.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(FrameRef<'_>, usize)>, DecodeError> {
    if buf.len() < FRAME_HEADER_BYTES {
        return Ok(None);
    }
    let payload_len = check_header(buf)?;
    let total = FRAME_HEADER_BYTES + payload_len;
    if buf.len() < total {
        return Ok(None);
    }
    let expected = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]);
    let actual =
        crc32c::crc32c_append(crc32c::crc32c(&buf[0..12]), &buf[FRAME_HEADER_BYTES..total]);
    if expected != actual {
        return Err(DecodeError::ChecksumMismatch { expected, actual });
    }
    let signal_count = u16::from_le_bytes([buf[4], buf[5]]) as usize;
    Ok(Some((
        FrameRef {
            signal_count,
            payload: &buf[FRAME_HEADER_BYTES..total],
        },
        total,
    )))
}

/// Iterator over the signals of a frame.
pub struct SignalIter<'a> {
    reader: Reader<'a>,
    left: usize,
    index: usize,
}

impl SignalIter<'_> {
    fn next_signal(&mut self) -> Result<Signal, DecodeError> {
        if self.reader.remaining() < SIGNAL_HEADER_BYTES {
            // Refused below; field by field, so the error names the field
            // that is cut short.
            return self.next_signal_by_field();
        }
        // The header in one read: every signal of every frame comes here.
        let h: [u8; SIGNAL_HEADER_BYTES] = self.reader.array()?;
        let gsn = u16::from_le_bytes([h[0], h[1]]);
        let flags = u16::from_le_bytes([h[2], h[3]]);
        if flags != 0 {
            return Err(DecodeError::BadValue {
                field: "signal flags",
                value: u64::from(flags),
            });
        }
        let body_len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
        let receiver = ref_from([h[8], h[9], h[10], h[11]])?;
        let sender = ref_from([h[12], h[13], h[14], h[15]])?;
        self.body(gsn, body_len, receiver, sender)
    }

    /// [`SignalIter::next_signal`] for a header that is cut short.
    #[cold]
    fn next_signal_by_field(&mut self) -> Result<Signal, DecodeError> {
        let gsn = u16::take(&mut self.reader)?;
        let flags = u16::take(&mut self.reader)?;
        if flags != 0 {
            return Err(DecodeError::BadValue {
                field: "signal flags",
                value: u64::from(flags),
            });
        }
        let body_len = u32::take(&mut self.reader)? as usize;
        let receiver = take_ref(&mut self.reader)?;
        let sender = take_ref(&mut self.reader)?;
        self.body(gsn, body_len, receiver, sender)
    }

    #[inline]
    fn body(
        &mut self,
        gsn: u16,
        body_len: usize,
        receiver: BlockRef,
        sender: BlockRef,
    ) -> Result<Signal, DecodeError> {
        let body_bytes = self.reader.take(body_len)?;
        let mut body_reader = Reader::new(body_bytes);
        let body = SignalBody::decode_fields(gsn, &mut body_reader)?;
        if body_reader.remaining() != 0 {
            return Err(DecodeError::TrailingBytes {
                gsn,
                bytes: body_reader.remaining(),
            });
        }
        Ok(Signal {
            receiver,
            sender,
            body,
        })
    }
}

impl Iterator for SignalIter<'_> {
    type Item = Result<Signal, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let index = self.index;
        let result = self.next_signal().map_err(|error| DecodeError::InSignal {
            index,
            source: Box::new(error),
        });
        self.index += 1;
        self.left = if result.is_err() { 0 } else { self.left - 1 };
        if self.left == 0 && result.is_ok() && self.reader.remaining() != 0 {
            // Bytes after the last signal: the frame lied about its count.
            return Some(Err(DecodeError::TrailingBytes {
                gsn: 0,
                bytes: self.reader.remaining(),
            }));
        }
        Some(result)
    }
}

/// A block reference from its 4 header bytes: node, block, instance.
#[inline]
fn ref_from(b: [u8; 4]) -> Result<BlockRef, DecodeError> {
    let node = NodeId::new(b[0]).ok_or(DecodeError::BadValue {
        field: "node id",
        value: 0,
    })?;
    Ok(BlockRef {
        node,
        block: BlockNumber(b[1]),
        instance: u16::from_le_bytes([b[2], b[3]]),
    })
}

fn take_ref(reader: &mut Reader<'_>) -> Result<BlockRef, DecodeError> {
    let node = NodeId::take(reader)?;
    let block = BlockNumber(u8::take(reader)?);
    let instance = u16::take(reader)?;
    Ok(BlockRef {
        node,
        block,
        instance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An encoded signal (one of a few kinds, picked by `pick`), with
    /// `noise` written over some of its bytes.
    fn signal_bytes(pick: usize, noise: &[(usize, u8)], ops: &[u8]) -> Vec<u8> {
        let node = |n| NodeId::new(n).expect("not 0");
        let body = match pick % 3 {
            0 => SignalBody::Heartbeat { view_id: 7 },
            1 => SignalBody::TcKeyReq {
                tx_id: 9,
                flags: 3,
                ops: ops.to_vec(),
            },
            _ => SignalBody::LdmKeyConf {
                tx_id: 9,
                results: ops.to_vec(),
                ok_in_order: 1,
            },
        };
        let signal = Signal {
            receiver: BlockRef::new(node(2), BlockNumber::TRANSACTION_COORDINATOR, 1),
            sender: BlockRef::new(node(3), BlockNumber::LOCAL_DATA_MANAGER, 258),
            body,
        };
        let mut bytes = Vec::new();
        encode_signal(&signal, &mut bytes);
        for &(at, value) in noise {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        bytes
    }

    fn iter(payload: &[u8]) -> SignalIter<'_> {
        SignalIter {
            reader: Reader::new(payload),
            left: 1,
            index: 0,
        }
    }

    proptest! {
        /// The header read in one piece and the header read field by field
        /// agree on every input: the same signal, or the same error.
        #[test]
        fn header_in_one_read_agrees_with_field_by_field(
            pick in any::<usize>(),
            noise in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
            ops in proptest::collection::vec(any::<u8>(), 0..48),
            cut in any::<prop::sample::Index>(),
            whole in any::<bool>(),
        ) {
            let bytes = signal_bytes(pick, &noise, &ops);
            let keep = if whole { bytes.len() } else { cut.index(bytes.len() + 1) };
            let bytes = &bytes[..keep];
            let fast = iter(bytes).next_signal();
            let by_field = iter(bytes).next_signal_by_field();
            prop_assert_eq!(fast, by_field);
        }
    }
}
