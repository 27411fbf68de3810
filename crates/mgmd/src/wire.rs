//! Signals over one blocking TCP stream, for both ends of the mgm protocol.
//!
//! The management protocol is rare and small, so it uses plain blocking
//! sockets (one thread per connection) instead of the transporter's polled,
//! batched send buffers; only the frame format is shared with the data path.

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use signal::frame::FRAME_MAX_BYTES;
use signal::{decode_frame, encode_frame, DecodeError, EncodeError, Signal};

/// Room for one whole frame behind the tail of a previous one, so a frame
/// never has to wait for a compaction to fit.
pub(crate) const RECEIVE_BUFFER_BYTES: usize = FRAME_MAX_BYTES * 2;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("connection closed")]
    Closed,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Decode(#[from] DecodeError),
    #[error("signal {0} may not come from the network")]
    LocalOnly(&'static str),
}

impl ReadError {
    /// A read timeout (set with `set_read_timeout`) expired.
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(self, ReadError::Io(e)
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }
}

/// Turns the bytes of one stream into signals, a whole checked frame at a time.
pub(crate) struct FrameReader {
    buffer: Vec<u8>,
    /// Bytes `start..end` are received and not yet decoded.
    start: usize,
    end: usize,
    /// Signals of the last decoded frame not yet handed out.
    pending: VecDeque<Signal>,
}

impl FrameReader {
    pub(crate) fn new() -> FrameReader {
        FrameReader {
            buffer: vec![0; RECEIVE_BUFFER_BYTES],
            start: 0,
            end: 0,
            pending: VecDeque::new(),
        }
    }

    /// The next signal; blocks (up to the stream's read timeout) for more bytes.
    /// After an error other than a timeout the stream is unusable: the
    /// position inside the byte stream is lost.
    pub(crate) fn next_signal(&mut self, stream: &mut impl Read) -> Result<Signal, ReadError> {
        loop {
            if let Some(signal) = self.pending.pop_front() {
                return Ok(signal);
            }
            if self.decode_one()? {
                continue;
            }
            self.fill(stream)?;
        }
    }

    /// Decodes one whole frame into `pending`; false when more bytes are needed.
    fn decode_one(&mut self) -> Result<bool, ReadError> {
        let Some((frame, frame_bytes)) = decode_frame(&self.buffer[self.start..self.end])? else {
            return Ok(false);
        };
        assert!(frame_bytes <= self.end - self.start);
        let mut signals = VecDeque::with_capacity(frame.signal_count());
        for signal in frame.signals() {
            let signal = signal?;
            if signal.body.is_local_only() {
                return Err(ReadError::LocalOnly(signal.body.name()));
            }
            signals.push_back(signal);
        }
        self.start += frame_bytes;
        self.pending = signals;
        Ok(true)
    }

    fn fill(&mut self, stream: &mut impl Read) -> Result<(), ReadError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buffer.len() {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        // What is left undecoded is less than one frame, so there is room.
        assert!(self.end < self.buffer.len());
        loop {
            match stream.read(&mut self.buffer[self.end..]) {
                Ok(0) => return Err(ReadError::Closed),
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }
}

/// Encodes `signal` as one frame.
pub(crate) fn encode(signal: &Signal) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_frame(std::slice::from_ref(signal), &mut out)?;
    Ok(out)
}

/// Writes one signal as one frame.
pub(crate) fn write_signal(stream: &mut impl Write, signal: &Signal) -> Result<(), WriteError> {
    let frame = encode(signal)?;
    stream.write_all(&frame)?;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    #[error("{0}")]
    Encode(#[from] EncodeError),
    #[error("{0}")]
    Io(#[from] io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::{BlockNumber, BlockRef, NodeId, SignalBody};

    fn node(id: u8) -> NodeId {
        NodeId::new(id).expect("non-zero")
    }

    fn show_req() -> Signal {
        let address = BlockRef::new(node(1), BlockNumber::MANAGEMENT, 0);
        Signal {
            receiver: address,
            sender: address,
            body: SignalBody::MgmShowReq {},
        }
    }

    /// Hands out its bytes a few at a time, as a slow socket would.
    struct Trickle {
        bytes: Vec<u8>,
        position: usize,
        step: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self
                .step
                .min(out.len())
                .min(self.bytes.len() - self.position);
            out[..n].copy_from_slice(&self.bytes[self.position..self.position + n]);
            self.position += n;
            Ok(n)
        }
    }

    #[test]
    fn frames_split_across_reads_are_reassembled() {
        let mut bytes = Vec::new();
        for _ in 0..5 {
            write_signal(&mut bytes, &show_req()).expect("encodes");
        }
        let mut stream = Trickle {
            bytes,
            position: 0,
            step: 7,
        };
        let mut reader = FrameReader::new();
        for _ in 0..5 {
            let signal = reader.next_signal(&mut stream).expect("a whole signal");
            assert_eq!(signal, show_req());
        }
        assert!(matches!(
            reader.next_signal(&mut stream),
            Err(ReadError::Closed)
        ));
    }

    #[test]
    fn garbage_is_refused() {
        let mut stream: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut reader = FrameReader::new();
        assert!(matches!(
            reader.next_signal(&mut stream),
            Err(ReadError::Decode(DecodeError::BadMagic(_)))
        ));
    }

    #[test]
    fn local_only_signals_are_refused() {
        let mut signal = show_req();
        signal.body = SignalBody::Timeout { timer_id: 1 };
        let mut bytes = Vec::new();
        write_signal(&mut bytes, &signal).expect("encodes");
        let mut reader = FrameReader::new();
        assert!(matches!(
            reader.next_signal(&mut bytes.as_slice()),
            Err(ReadError::LocalOnly("Timeout"))
        ));
    }
}
