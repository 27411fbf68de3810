//! Payload buffers reused on each thread.
//!
//! Op batches and result batches are the bulk of the traffic, and each
//! used to cost an allocation where its signal was decoded or built and a
//! free where it was consumed: on a data node's main thread, hundreds of
//! thousands of each per second. A thread keeps the buffers of payloads it
//! consumed or sent ([`keep`]) and fills them again: a block asking for a
//! result buffer (`kernel::Context::buffer`) and the decoder copying a
//! received payload ([`filled`]) take one from here before allocating.
//!
//! Bounded: at most [`BUFFERS_KEPT_MAX`] buffers and [`KEPT_BYTES_MAX`]
//! bytes of capacity per thread; a buffer smaller than
//! [`BUFFER_KEPT_BYTES_MIN`] (it would only grow again for a result) or
//! larger than [`BUFFER_KEPT_BYTES_MAX`] (a rare large batch) is freed.
//! Thread-local, so no lock: a buffer kept on one thread is reused there.

use std::cell::RefCell;

/// Most buffers a thread keeps: enough for one round of a busy thread
/// (each request in flight holds one until it is answered).
pub const BUFFERS_KEPT_MAX: usize = 1_024;
/// Most bytes of capacity a thread keeps in all.
pub const KEPT_BYTES_MAX: usize = 4 << 20;
/// Smallest buffer kept, in bytes.
pub const BUFFER_KEPT_BYTES_MIN: usize = 128;
/// Largest buffer kept, in bytes.
pub const BUFFER_KEPT_BYTES_MAX: usize = 64 << 10;

struct Kept {
    buffers: Vec<Vec<u8>>,
    /// Capacity of `buffers`, in bytes.
    bytes: usize,
}

thread_local! {
    static KEPT: RefCell<Kept> = const {
        RefCell::new(Kept {
            buffers: Vec::new(),
            bytes: 0,
        })
    };
}

/// An empty buffer: a kept one when the thread has one.
#[inline]
pub fn take() -> Vec<u8> {
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        match kept.buffers.pop() {
            Some(buffer) => {
                kept.bytes -= buffer.capacity();
                debug_assert!(buffer.is_empty(), "a kept buffer is empty");
                buffer
            }
            None => Vec::new(),
        }
    })
}

/// A buffer holding a copy of `bytes`: a kept one when the thread has one
/// (it grows if it is too small), else one of exactly that size. Empty
/// bytes take no buffer (a kept one would be freed by a consumer that
/// does not keep an empty payload).
#[inline]
pub fn filled(bytes: &[u8]) -> Vec<u8> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let mut buffer = take();
    if buffer.capacity() == 0 {
        return bytes.to_vec();
    }
    buffer.extend_from_slice(bytes);
    buffer
}

/// Keeps `buffer` (cleared) for reuse on this thread, within the bounds;
/// frees it otherwise.
#[inline]
pub fn keep(mut buffer: Vec<u8>) {
    let capacity = buffer.capacity();
    if !(BUFFER_KEPT_BYTES_MIN..=BUFFER_KEPT_BYTES_MAX).contains(&capacity) {
        return;
    }
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.buffers.len() < BUFFERS_KEPT_MAX && kept.bytes + capacity <= KEPT_BYTES_MAX {
            buffer.clear();
            kept.bytes += capacity;
            kept.buffers.push(buffer);
        }
    });
}

/// Buffers this thread keeps now (for tests).
pub fn kept() -> usize {
    KEPT.with(|kept| kept.borrow().buffers.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_buffers_are_reused_within_bounds() {
        // Each test runs on its own thread: the pool starts empty.
        assert_eq!(kept(), 0);
        let small = Vec::with_capacity(BUFFER_KEPT_BYTES_MIN - 1);
        keep(small);
        keep(Vec::with_capacity(BUFFER_KEPT_BYTES_MAX + 1));
        assert_eq!(kept(), 0, "too small or too large: freed");
        let mut buffer = Vec::with_capacity(512);
        buffer.extend_from_slice(b"old");
        let at = buffer.as_ptr();
        keep(buffer);
        assert_eq!(kept(), 1);
        let again = filled(b"new bytes");
        assert_eq!(again, b"new bytes");
        assert_eq!(again.as_ptr(), at, "the kept buffer came back, cleared");
        assert_eq!(kept(), 0);
        assert_eq!(
            filled(b"fresh").capacity(),
            5,
            "none kept: exactly the bytes"
        );
        keep(Vec::with_capacity(BUFFER_KEPT_BYTES_MIN));
        let empty = filled(b"");
        assert_eq!(
            (empty.capacity(), kept()),
            (0, 1),
            "empty bytes take no buffer"
        );
        drop(take());
        for _ in 0..BUFFERS_KEPT_MAX + 10 {
            keep(Vec::with_capacity(BUFFER_KEPT_BYTES_MIN));
        }
        assert_eq!(kept(), BUFFERS_KEPT_MAX, "at most BUFFERS_KEPT_MAX");
        while kept() > 0 {
            drop(take());
        }
        for _ in 0..(KEPT_BYTES_MAX / BUFFER_KEPT_BYTES_MAX) + 4 {
            keep(Vec::with_capacity(BUFFER_KEPT_BYTES_MAX));
        }
        assert_eq!(
            kept(),
            KEPT_BYTES_MAX / BUFFER_KEPT_BYTES_MAX,
            "at most KEPT_BYTES_MAX"
        );
    }
}
