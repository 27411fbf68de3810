//! The write half of one up connection, and the bytes waiting for it.
//!
//! Sockets are non-blocking. What the socket does not take at once stays in
//! `pending`, whole chunks in order, and is written when the socket reports
//! writable again (to the send thread's poll in send-thread mode, to the
//! receive thread's otherwise). Everything queued for one peer is bounded by
//! `send_buffer_max_bytes`: a peer that cannot keep up is disconnected
//! rather than allowed to grow our memory.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

use std::sync::Arc;

use crate::shared::{add, CloseReason, Counters, LinkCounters};
use crate::stream::Stream;

/// Chunks per `writev`; chunks are up to a frame (1 MiB) each, so few are needed.
const IOVEC_MAX: usize = 64;

/// `Chunk::origin` of a chunk that goes back to no sender.
pub(crate) const ORIGIN_NONE: usize = usize::MAX;

/// Whole frames for one peer, handed from a sender to the writing side.
pub(crate) struct Chunk {
    pub bytes: Vec<u8>,
    pub slot: usize,
    /// The connection these frames were encoded for; any other one drops them.
    pub generation: u64,
    pub signals: u64,
    pub frames: u64,
    /// The sender link the buffer returns to once written.
    pub origin: usize,
}

pub(crate) struct Writer {
    stream: Stream,
    /// The peer's slot, for the chunks made here.
    slot: usize,
    generation: u64,
    pending: VecDeque<Chunk>,
    /// Unwritten bytes in `pending`.
    pending_bytes: usize,
    /// Bytes of `pending[0]` already written.
    offset: usize,
    /// The socket said WouldBlock; wait for writability before trying again.
    blocked: bool,
    /// A write failed or the buffer overflowed; the connection is being closed.
    failed: bool,
    /// The peer's link counters (`PeerShared::counters`).
    link: Arc<LinkCounters>,
}

impl Writer {
    pub fn new(stream: Stream, slot: usize, generation: u64, link: Arc<LinkCounters>) -> Writer {
        Writer {
            stream,
            slot,
            generation,
            pending: VecDeque::new(),
            pending_bytes: 0,
            offset: 0,
            blocked: false,
            failed: false,
            link,
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn stream_mut(&mut self) -> &mut Stream {
        &mut self.stream
    }

    /// Whether frames encoded for `generation` may still go out here.
    pub fn accepts(&self, generation: u64) -> bool {
        !self.failed && self.generation == generation
    }

    /// The socket reported writable.
    pub fn set_writable(&mut self) {
        self.blocked = false;
    }

    /// Queues `chunk` behind what is pending (nothing is written yet).
    pub fn enqueue(
        &mut self,
        chunk: Chunk,
        max_bytes: usize,
        counters: &Counters,
    ) -> Result<(), CloseReason> {
        assert!(self.accepts(chunk.generation));
        // An empty chunk would make `advance` stall on it.
        assert!(!chunk.bytes.is_empty());
        let bytes = self.pending_bytes + chunk.bytes.len();
        if bytes > max_bytes {
            add(&counters.signals_dropped, chunk.signals);
            return Err(self.fail(counters, CloseReason::SendBufferFull { bytes }));
        }
        self.pending_bytes = bytes;
        self.pending.push_back(chunk);
        Ok(())
    }

    /// Writes as much of `pending` as the socket takes, gathering chunks into
    /// one `writev`. Fully written chunks are moved to `done` for reuse.
    pub fn write_pending(
        &mut self,
        counters: &Counters,
        done: &mut Vec<Chunk>,
    ) -> Result<(), CloseReason> {
        assert!(!self.failed);
        while !self.pending.is_empty() && !self.blocked {
            let mut slices = [IoSlice::new(&[]); IOVEC_MAX];
            let mut count = 0;
            for (slice, chunk) in slices.iter_mut().zip(self.pending.iter()) {
                let start = if count == 0 { self.offset } else { 0 };
                *slice = IoSlice::new(&chunk.bytes[start..]);
                count += 1;
            }
            add(&counters.write_syscalls, 1);
            match self.stream.write_vectored(&slices[..count]) {
                Ok(0) => {
                    return Err(self.fail(
                        counters,
                        CloseReason::WriteFailed(io::ErrorKind::WriteZero.into()),
                    ))
                }
                Ok(written) => self.advance(written, counters, done),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.blocked = true,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(self.fail(counters, CloseReason::WriteFailed(error))),
            }
        }
        Ok(())
    }

    /// Flush mode: writes `bytes` (whole frames) straight from the sender's
    /// buffer when nothing is pending; what the socket does not take is
    /// copied and queued.
    pub fn write_direct(
        &mut self,
        bytes: &[u8],
        signals: u64,
        frames: u64,
        max_bytes: usize,
        counters: &Counters,
        done: &mut Vec<Chunk>,
    ) -> Result<(), CloseReason> {
        assert!(!self.failed && !bytes.is_empty());
        let mut written = 0;
        if self.pending.is_empty() && !self.blocked {
            while written < bytes.len() {
                add(&counters.write_syscalls, 1);
                match self.stream.write(&bytes[written..]) {
                    Ok(0) => {
                        return Err(self.fail(
                            counters,
                            CloseReason::WriteFailed(io::ErrorKind::WriteZero.into()),
                        ))
                    }
                    Ok(n) => {
                        written += n;
                        add(&counters.bytes_sent, n as u64);
                        add(&self.link.bytes_sent, n as u64);
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        self.blocked = true;
                        break;
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => {
                        add(&counters.signals_dropped, signals);
                        return Err(self.fail(counters, CloseReason::WriteFailed(error)));
                    }
                }
            }
            if written == bytes.len() {
                add(&counters.signals_sent, signals);
                add(&counters.frames_sent, frames);
                add(&self.link.frames_sent, frames);
                return Ok(());
            }
        }
        let chunk = Chunk {
            bytes: bytes[written..].to_vec(),
            slot: self.slot,
            generation: self.generation,
            signals,
            frames,
            origin: ORIGIN_NONE,
        };
        self.enqueue(chunk, max_bytes, counters)?;
        self.write_pending(counters, done)
    }

    /// The connection is gone: forget what is pending, counting it as dropped.
    pub fn discard(&mut self, counters: &Counters) {
        let signals: u64 = self.pending.iter().map(|chunk| chunk.signals).sum();
        add(&counters.signals_dropped, signals);
        self.pending.clear();
        self.pending_bytes = 0;
        self.offset = 0;
    }

    fn fail(&mut self, counters: &Counters, reason: CloseReason) -> CloseReason {
        self.discard(counters);
        self.failed = true;
        reason
    }

    fn advance(&mut self, mut written: usize, counters: &Counters, done: &mut Vec<Chunk>) {
        assert!(written <= self.pending_bytes);
        add(&counters.bytes_sent, written as u64);
        add(&self.link.bytes_sent, written as u64);
        self.pending_bytes -= written;
        while written > 0 {
            let rest = self.pending[0].bytes.len() - self.offset;
            if written < rest {
                self.offset += written;
                return;
            }
            written -= rest;
            self.offset = 0;
            if let Some(chunk) = self.pending.pop_front() {
                add(&counters.signals_sent, chunk.signals);
                add(&counters.frames_sent, chunk.frames);
                add(&self.link.frames_sent, chunk.frames);
                done.push(chunk);
            }
        }
    }
}
