//! The per-thread sending end: many signals into few frames, few frames into
//! one write.
//!
//! A `TransportSender` belongs to one thread and shares nothing on the hot
//! path but an atomic load of the peer's link state: signals are encoded
//! into its own per-peer buffers, and only `flush` (or a frame filling up)
//! hands whole frames on. In send-thread mode they travel through a bounded
//! SPSC queue to the send thread, and the written buffers come back through
//! a second queue, so a warm sender does not allocate.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;

use rtrb::{Consumer, Producer, PushError, RingBuffer};
use signal::Signal;

use crate::encode::{OpenBuffer, Pushed};
use crate::send_thread::SenderLink;
use crate::shared::Shared;
use crate::writer::{Chunk, ORIGIN_NONE};

/// Chunks a sender may have in flight to the send thread; it waits for room beyond.
const SENDER_QUEUE_CHUNKS: usize = 256;
/// First capacity of a per-peer buffer; it grows to what the traffic needs.
const BUFFER_INITIAL_BYTES: usize = 64 << 10;

/// Encodes signals for the network; see the module documentation. `Send`, not `Sync`.
pub struct TransportSender {
    shared: Arc<Shared>,
    /// Indexed by peer slot.
    buffers: Vec<OpenBuffer>,
    /// Slots whose buffers hold signals.
    dirty: Vec<usize>,
    /// Send-thread mode only.
    queues: Option<Queues>,
    /// Flush mode: chunks a write finished (none are reused; kept to avoid reallocating).
    done: Vec<Chunk>,
    _not_sync: PhantomData<Cell<()>>,
}

struct Queues {
    chunks: Producer<Chunk>,
    returns: Consumer<Vec<u8>>,
}

impl TransportSender {
    pub(crate) fn new(shared: Arc<Shared>) -> TransportSender {
        let queues = shared.send.as_ref().map(|send| {
            let (chunks, chunks_out) = RingBuffer::new(SENDER_QUEUE_CHUNKS);
            let (returns_in, returns) = RingBuffer::new(SENDER_QUEUE_CHUNKS);
            send.add_link(SenderLink::new(chunks_out, returns_in));
            Queues { chunks, returns }
        });
        let buffers = shared.peers.iter().map(|_| OpenBuffer::new()).collect();
        TransportSender {
            shared,
            buffers,
            dirty: Vec::new(),
            queues,
            done: Vec::new(),
            _not_sync: PhantomData,
        }
    }

    /// Encodes `signal` for its receiver's node. Dropped (and counted) if
    /// that node is not an up peer.
    pub fn send(&mut self, signal: &Signal) {
        let node = signal.receiver.node;
        let Some(slot) = self.shared.slot(node) else {
            tracing::debug!(%node, "dropping {}: node {node} is not a peer", signal.body.name());
            self.shared.count_dropped(1);
            return;
        };
        let link = self.shared.peers[slot].link();
        if !link.up {
            self.shared.count_dropped(1);
            return;
        }
        if self.buffers[slot].bytes.capacity() == 0 {
            self.buffers[slot].bytes = self.fresh_buffer();
        }
        let buffer = &mut self.buffers[slot];
        if buffer.generation != link.generation {
            // Encoded for a connection that broke since: the new one must not see them.
            self.shared.count_dropped(buffer.signals());
            buffer.clear();
            buffer.generation = link.generation;
        }
        match buffer.push(signal) {
            Ok(Pushed::Joined) => {}
            Ok(Pushed::FrameClosed) => self.hand_off(slot),
            Err(error) => {
                tracing::warn!(%node, %error, "dropping a signal that no frame can carry");
                self.shared.count_dropped(1);
                return;
            }
        }
        let buffer = &mut self.buffers[slot];
        if !buffer.dirty {
            buffer.dirty = true;
            self.dirty.push(slot);
        }
    }

    /// Hands every buffered signal to the network.
    pub fn flush(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        for &slot in &dirty {
            let buffer = &mut self.buffers[slot];
            assert!(buffer.dirty);
            buffer.dirty = false;
            buffer.finish();
            self.hand_off(slot);
            assert!(!self.buffers[slot].has_open_frame());
        }
        dirty.clear();
        self.dirty = dirty;
        if let Some(send) = &self.shared.send {
            send.wake_if_sleeping();
        }
    }

    /// Hands the whole frames of `slot`'s buffer on; an open frame stays.
    fn hand_off(&mut self, slot: usize) {
        if self.buffers[slot].closed_bytes().is_empty() {
            return;
        }
        if self.shared.is_stopping() {
            let (signals, _) = self.buffers[slot].closed_counts();
            self.shared.count_dropped(signals);
            self.buffers[slot].consume_closed();
            return;
        }
        if self.queues.is_some() {
            self.queue_to_send_thread(slot);
        } else {
            self.write_now(slot);
        }
    }

    fn queue_to_send_thread(&mut self, slot: usize) {
        let fresh = if self.buffers[slot].has_open_frame() {
            self.fresh_buffer()
        } else {
            Vec::new()
        };
        let buffer = &mut self.buffers[slot];
        let generation = buffer.generation;
        let closed = buffer.take_closed(fresh);
        let mut chunk = Chunk {
            bytes: closed.bytes,
            slot,
            generation,
            signals: closed.signals,
            frames: closed.frames,
            origin: ORIGIN_NONE,
        };
        let (Some(queues), Some(send)) = (self.queues.as_mut(), self.shared.send.as_ref()) else {
            unreachable!("a sender has queues exactly when there is a send thread");
        };
        // The send thread empties queues whatever the sockets do, so a full
        // queue is a moment's wait, not a stall.
        loop {
            match queues.chunks.push(chunk) {
                Ok(()) => return,
                Err(PushError::Full(back)) => chunk = back,
            }
            if self.shared.is_stopping() {
                self.shared.count_dropped(chunk.signals);
                return;
            }
            send.wake_now();
            std::thread::yield_now();
        }
    }

    fn write_now(&mut self, slot: usize) {
        let shared = &*self.shared;
        let buffer = &mut self.buffers[slot];
        let (signals, frames) = buffer.closed_counts();
        let generation = buffer.generation;
        let failure = {
            let mut writer = shared.peers[slot].lock_writer();
            match writer.as_mut() {
                Some(writer) if writer.accepts(generation) => writer
                    .write_direct(
                        buffer.closed_bytes(),
                        signals,
                        frames,
                        shared.send_buffer_max_bytes,
                        &shared.counters,
                        &mut self.done,
                    )
                    .err(),
                _ => {
                    shared.count_dropped(signals);
                    None
                }
            }
        };
        buffer.consume_closed();
        self.done.clear();
        if let Some(reason) = failure {
            shared.request_close(slot, generation, reason);
        }
    }

    /// A buffer the send thread gave back, or a new one.
    fn fresh_buffer(&mut self) -> Vec<u8> {
        if let Some(queues) = self.queues.as_mut() {
            if let Ok(bytes) = queues.returns.pop() {
                assert!(bytes.is_empty());
                return bytes;
            }
        }
        Vec::with_capacity(BUFFER_INITIAL_BYTES)
    }
}

impl Drop for TransportSender {
    fn drop(&mut self) {
        self.flush();
    }
}
