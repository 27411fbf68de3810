//! A per-peer send buffer that keeps one frame open across `send` calls:
//! the open frame starts with a placeholder header, signals are appended
//! behind it, and `signal::frame::seal_frame` writes the header when the
//! frame closes (full, or at flush). Once the buffer has grown, encoding
//! allocates nothing.

use signal::frame::{
    encode_signal, seal_frame, FRAME_HEADER_BYTES, FRAME_PAYLOAD_MAX_BYTES, FRAME_SIGNALS_MAX,
};
use signal::{EncodeError, Signal};

/// What a push did to the frames of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// The signal joined the open frame.
    Joined,
    /// The open frame was full: it was closed, and the signal opened the next.
    FrameClosed,
}

/// Whole frames taken out of an [`OpenBuffer`].
pub(crate) struct Closed {
    pub bytes: Vec<u8>,
    pub signals: u64,
    pub frames: u64,
}

pub(crate) struct OpenBuffer {
    pub bytes: Vec<u8>,
    /// The connection generation these signals were meant for.
    pub generation: u64,
    /// Listed in the sender's dirty list (it holds signals to flush).
    pub dirty: bool,
    /// Start of the open frame; everything before it is whole frames.
    frame_start: usize,
    frame_signals: usize,
    /// Signals in `bytes`, closed and open frames together.
    signals: u64,
    /// Closed frames in `bytes`.
    frames: u64,
}

impl OpenBuffer {
    pub const fn new() -> OpenBuffer {
        OpenBuffer {
            bytes: Vec::new(),
            generation: 0,
            dirty: false,
            frame_start: 0,
            frame_signals: 0,
            signals: 0,
            frames: 0,
        }
    }

    pub fn signals(&self) -> u64 {
        self.signals
    }

    pub fn has_open_frame(&self) -> bool {
        self.frame_signals > 0
    }

    /// Forgets every signal (they were meant for a connection that is gone).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.frame_start = 0;
        self.frame_signals = 0;
        self.signals = 0;
        self.frames = 0;
    }

    /// Appends `signal`; on error the buffer is as it was.
    pub fn push(&mut self, signal: &Signal) -> Result<Pushed, EncodeError> {
        let start = self.bytes.len();
        if self.frame_signals == 0 {
            self.bytes.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
            self.frame_start = start;
        }
        let signal_start = self.bytes.len();
        encode_signal(signal, &mut self.bytes);
        let signal_bytes = self.bytes.len() - signal_start;
        if signal_bytes > FRAME_PAYLOAD_MAX_BYTES {
            self.bytes.truncate(start);
            return Err(EncodeError::SignalTooLarge {
                name: signal.body.name(),
                bytes: signal_bytes,
            });
        }
        self.signals += 1;
        let payload_bytes = self.bytes.len() - self.frame_start - FRAME_HEADER_BYTES;
        if payload_bytes <= FRAME_PAYLOAD_MAX_BYTES && self.frame_signals < FRAME_SIGNALS_MAX {
            self.frame_signals += 1;
            return Ok(Pushed::Joined);
        }
        // The open frame is full: close it before this signal, which opens
        // the next frame behind a new placeholder (rare: frames are large).
        self.close_frame(signal_start);
        self.bytes
            .splice(signal_start..signal_start, [0u8; FRAME_HEADER_BYTES]);
        self.frame_start = signal_start;
        self.frame_signals = 1;
        Ok(Pushed::FrameClosed)
    }

    /// Closes the open frame: afterwards the buffer holds only whole frames.
    pub fn finish(&mut self) {
        if self.frame_signals > 0 {
            self.close_frame(self.bytes.len());
            self.frame_start = self.bytes.len();
        }
    }

    /// The whole frames (everything but the open frame).
    pub fn closed_bytes(&self) -> &[u8] {
        &self.bytes[..self.frame_start]
    }

    /// Signals and frames in `closed_bytes`.
    pub fn closed_counts(&self) -> (u64, u64) {
        (self.signals - self.frame_signals as u64, self.frames)
    }

    /// Drops the whole frames (they were written), keeping the open frame.
    pub fn consume_closed(&mut self) {
        self.bytes.drain(..self.frame_start);
        self.signals = self.frame_signals as u64;
        self.frames = 0;
        self.frame_start = 0;
    }

    /// Moves the whole frames out; the open frame, if any, continues in `fresh`.
    pub fn take_closed(&mut self, fresh: Vec<u8>) -> Closed {
        assert!(fresh.is_empty());
        let (signals, frames) = self.closed_counts();
        let mut bytes = std::mem::replace(&mut self.bytes, fresh);
        if self.frame_signals > 0 {
            self.bytes.extend_from_slice(&bytes[self.frame_start..]);
            bytes.truncate(self.frame_start);
        }
        assert_eq!(bytes.len(), self.frame_start);
        self.signals = self.frame_signals as u64;
        self.frames = 0;
        self.frame_start = 0;
        Closed {
            bytes,
            signals,
            frames,
        }
    }

    /// Writes the header of the open frame, which ends at `end`.
    fn close_frame(&mut self, end: usize) {
        seal_frame(&mut self.bytes[self.frame_start..end], self.frame_signals);
        self.frames += 1;
        self.frame_signals = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::{decode_frame, encode_frame, BlockNumber, BlockRef, NodeId, SignalBody};

    fn heartbeat(view_id: u32) -> Signal {
        let node = |n| NodeId::new(n).expect("nonzero");
        Signal {
            receiver: BlockRef::new(node(2), BlockNumber::MEMBERSHIP, 0),
            sender: BlockRef::new(node(1), BlockNumber::MEMBERSHIP, 0),
            body: SignalBody::Heartbeat { view_id },
        }
    }

    fn big(text_bytes: usize) -> Signal {
        Signal {
            body: SignalBody::MgmEventRep {
                severity: signal::Severity::Info,
                category: signal::EventCategory::Info,
                level: 7,
                text: "x".repeat(text_bytes),
            },
            ..heartbeat(0)
        }
    }

    fn decode_all(mut bytes: &[u8]) -> Vec<Vec<Signal>> {
        let mut frames = Vec::new();
        while !bytes.is_empty() {
            let (frame, used) = decode_frame(bytes)
                .expect("valid frame")
                .expect("whole frame");
            frames.push(
                frame
                    .signals()
                    .collect::<Result<Vec<_>, _>>()
                    .expect("valid signals"),
            );
            bytes = &bytes[used..];
        }
        frames
    }

    #[test]
    fn same_bytes_as_frame_writer() {
        let signals: Vec<Signal> = (0..100).map(heartbeat).collect();
        let mut expected = Vec::new();
        encode_frame(&signals, &mut expected).expect("fits");
        let mut buffer = OpenBuffer::new();
        for signal in &signals {
            assert_eq!(buffer.push(signal), Ok(Pushed::Joined));
        }
        buffer.finish();
        assert_eq!(buffer.closed_bytes(), &expected[..]);
        assert_eq!(buffer.closed_counts(), (100, 1));
    }

    #[test]
    fn full_frame_closes_and_next_opens() {
        let signal = big(300_000);
        let mut buffer = OpenBuffer::new();
        let mut closed = 0;
        for _ in 0..7 {
            if buffer.push(&signal).expect("fits a frame") == Pushed::FrameClosed {
                closed += 1;
            }
        }
        assert_eq!(closed, 2, "three 300 KB signals fit one 1 MiB frame");
        let taken = buffer.take_closed(Vec::new());
        assert_eq!(taken.frames, 2);
        assert_eq!(taken.signals, 6);
        let frames = decode_all(&taken.bytes);
        assert_eq!(frames.len(), 2);
        assert!(frames.iter().all(|f| f.len() == 3 && f[0] == signal));
        buffer.finish();
        let frames = decode_all(buffer.closed_bytes());
        assert_eq!(frames, vec![vec![signal]]);
    }

    #[test]
    fn too_large_signal_leaves_buffer_unchanged() {
        let mut buffer = OpenBuffer::new();
        buffer.push(&heartbeat(1)).expect("fits");
        let before = buffer.bytes.clone();
        let result = buffer.push(&big(signal::frame::FRAME_PAYLOAD_MAX_BYTES));
        assert!(matches!(result, Err(EncodeError::SignalTooLarge { .. })));
        assert_eq!(buffer.bytes, before);
        buffer.push(&heartbeat(2)).expect("fits");
        buffer.finish();
        assert_eq!(
            decode_all(buffer.closed_bytes()),
            vec![vec![heartbeat(1), heartbeat(2)]]
        );
    }

    #[test]
    fn consume_closed_keeps_open_frame() {
        let mut buffer = OpenBuffer::new();
        let signal = big(600_000);
        buffer.push(&signal).expect("fits");
        assert_eq!(buffer.push(&signal), Ok(Pushed::FrameClosed));
        assert_eq!(
            decode_all(buffer.closed_bytes()),
            vec![vec![signal.clone()]]
        );
        buffer.consume_closed();
        assert!(buffer.closed_bytes().is_empty());
        assert_eq!(buffer.signals(), 1);
        buffer.push(&heartbeat(9)).expect("fits");
        buffer.finish();
        assert_eq!(
            decode_all(buffer.closed_bytes()),
            vec![vec![signal, heartbeat(9)]]
        );
        assert_eq!(buffer.closed_counts(), (2, 1));
    }
}
