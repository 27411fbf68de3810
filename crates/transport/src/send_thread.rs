//! The send thread: gathers the chunks of every sender and writes each
//! peer's share with as few `writev` calls as the socket allows.
//!
//! It owns its own `mio::Poll`. Write halves are registered there for
//! writability (edge-triggered) by the receive thread when a connection
//! comes up; a write that finds the socket full leaves the rest pending in
//! the peer's [`Writer`](crate::writer::Writer) until the socket reports
//! writable. The thread drains sender queues every round whatever the
//! sockets do, so a sender never waits on a slow peer; a slow peer's
//! pending bytes are bounded by `send_buffer_max_bytes` instead.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use mio::{Events, Poll, Token};
use rtrb::{Consumer, Producer};

use crate::shared::{CloseReason, Shared};
use crate::writer::Chunk;

pub(crate) const WAKER: Token = Token(usize::MAX);
/// Chunks taken from one sender per round, so one busy sender cannot starve the rest.
const LINK_DRAIN_MAX: usize = 256;
/// Sleep bound when idle; wake-ups normally come from senders or sockets.
const IDLE_POLL_MS: u64 = 100;
const EVENTS_MAX: usize = 256;
/// Buffers larger than this are freed rather than returned to their sender.
const RECYCLE_MAX_BYTES: usize = 2 * signal::frame::FRAME_MAX_BYTES;

/// The send thread's end of one sender's queues.
pub(crate) struct SenderLink {
    chunks: Consumer<Chunk>,
    returns: Producer<Vec<u8>>,
}

impl SenderLink {
    pub fn new(chunks: Consumer<Chunk>, returns: Producer<Vec<u8>>) -> SenderLink {
        SenderLink { chunks, returns }
    }
}

pub(crate) struct SendThread {
    shared: Arc<Shared>,
    poll: Poll,
    links: Vec<SenderLink>,
    /// Per peer slot: chunks gathered this round.
    gathered: Vec<Vec<Chunk>>,
    /// Per peer slot: the socket reported writable this round.
    writable: Vec<bool>,
    /// Written or dropped chunks whose buffers go back to their senders.
    done: Vec<Chunk>,
}

impl SendThread {
    pub fn new(shared: Arc<Shared>, poll: Poll) -> SendThread {
        let peers = shared.peers.len();
        SendThread {
            shared,
            poll,
            links: Vec::new(),
            gathered: (0..peers).map(|_| Vec::new()).collect(),
            writable: vec![false; peers],
            done: Vec::new(),
        }
    }

    pub fn run(mut self, cpubind: Option<usize>) {
        if let Some(cpu) = cpubind {
            crate::bind_to_cpu("send", cpu);
        }
        let mut events = Events::with_capacity(EVENTS_MAX);
        let mut busy = true;
        while !self.shared.is_stopping() {
            let timeout = if busy {
                Duration::ZERO
            } else {
                self.sleep_timeout()
            };
            if let Err(error) = self.poll.poll(&mut events, Some(timeout)) {
                if error.kind() != std::io::ErrorKind::Interrupted {
                    tracing::error!(%error, "transport send poll failed");
                    std::thread::sleep(Duration::from_millis(IDLE_POLL_MS));
                }
            }
            self.send().awake();
            for event in events.iter() {
                if event.token() != WAKER {
                    if let Some(writable) = self.writable.get_mut(event.token().0) {
                        *writable = true;
                    }
                }
            }
            self.adopt_new_links();
            busy = self.gather() > 0;
            for slot in 0..self.gathered.len() {
                if !self.gathered[slot].is_empty() || self.writable[slot] {
                    self.write_slot(slot);
                }
            }
            self.recycle();
        }
        self.drop_all();
    }

    fn send(&self) -> &crate::shared::SendShared {
        match &self.shared.send {
            Some(send) => send,
            None => unreachable!("the send thread runs only in send-thread mode"),
        }
    }

    /// Announces sleep, then looks again: a sender that queued meanwhile
    /// either is seen here or sees us sleeping and wakes us.
    fn sleep_timeout(&self) -> Duration {
        self.send().prepare_sleep();
        let work = self.links.iter().any(|link| !link.chunks.is_empty())
            || self.send().new_links_pending.load(Ordering::Acquire);
        if work {
            self.send().awake();
            Duration::ZERO
        } else {
            Duration::from_millis(IDLE_POLL_MS)
        }
    }

    fn adopt_new_links(&mut self) {
        let send = match &self.shared.send {
            Some(send) => send,
            None => return,
        };
        if send.new_links_pending.swap(false, Ordering::AcqRel) {
            let mut new_links = send
                .new_links
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.links.append(&mut new_links);
        }
    }

    /// Moves queued chunks into `gathered`, per peer; returns how many.
    fn gather(&mut self) -> usize {
        let mut moved = 0;
        for (index, link) in self.links.iter_mut().enumerate() {
            for _ in 0..LINK_DRAIN_MAX {
                let Ok(mut chunk) = link.chunks.pop() else {
                    break;
                };
                chunk.origin = index;
                self.gathered[chunk.slot].push(chunk);
                moved += 1;
            }
        }
        // A dropped sender's link goes once it is empty. Chunks still
        // pending with its index may then return to another sender: harmless.
        self.links
            .retain(|link| !(link.chunks.is_abandoned() && link.chunks.is_empty()));
        moved
    }

    fn write_slot(&mut self, slot: usize) {
        let shared = &*self.shared;
        let writable = std::mem::replace(&mut self.writable[slot], false);
        let mut failure: Option<(u64, CloseReason)> = None;
        {
            let mut guard = shared.peers[slot].lock_writer();
            let mut writer = guard.as_mut();
            if let Some(writer) = writer.as_mut() {
                if writable {
                    writer.set_writable();
                }
            }
            for chunk in self.gathered[slot].drain(..) {
                match writer.as_mut() {
                    Some(writer) if failure.is_none() && writer.accepts(chunk.generation) => {
                        let generation = writer.generation();
                        if let Err(reason) =
                            writer.enqueue(chunk, shared.send_buffer_max_bytes, &shared.counters)
                        {
                            failure = Some((generation, reason));
                        }
                    }
                    _ => {
                        shared.count_dropped(chunk.signals);
                        self.done.push(chunk);
                    }
                }
            }
            if let Some(writer) = writer {
                if failure.is_none() && writer.accepts(writer.generation()) {
                    if let Err(reason) = writer.write_pending(&shared.counters, &mut self.done) {
                        failure = Some((writer.generation(), reason));
                    }
                }
            }
        }
        if let Some((generation, reason)) = failure {
            shared.request_close(slot, generation, reason);
        }
    }

    /// Returns written buffers to the senders they came from.
    fn recycle(&mut self) {
        for chunk in self.done.drain(..) {
            let mut bytes = chunk.bytes;
            if bytes.capacity() > RECYCLE_MAX_BYTES {
                continue;
            }
            if let Some(link) = self.links.get_mut(chunk.origin) {
                bytes.clear();
                // A full return queue means the sender has plenty: free this one.
                let _ = link.returns.push(bytes);
            }
        }
    }

    fn drop_all(&mut self) {
        for link in &mut self.links {
            while let Ok(chunk) = link.chunks.pop() {
                self.shared.count_dropped(chunk.signals);
            }
        }
        for gathered in &mut self.gathered {
            for chunk in gathered.drain(..) {
                self.shared.count_dropped(chunk.signals);
            }
        }
    }
}
