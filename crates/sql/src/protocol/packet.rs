//! Packet framing and the field codecs of MySQL's protocol.
//!
//! A packet is a 3-byte little-endian payload length, a 1-byte sequence id
//! and the payload. A payload of 16 MiB − 1 bytes or more is cut into
//! frames of exactly 0xFF_FFFF bytes followed by a shorter one (possibly
//! empty); the receiver joins them. Every command starts a new sequence at
//! 0 and each frame, either way, takes the next id.
//!
//! ```text
//! +----------+-----+---------------------------+
//! | len: u24 | seq | payload (len bytes)       |
//! +----------+-----+---------------------------+
//! ```
//!
//! Answers are built in place in one output buffer and written with one
//! `write` when the command is answered (or when the buffer passes
//! [`OUT_BUFFER_BYTES_MAX`], so a large result set streams in bounded
//! memory).

use std::io::{self, BufRead, BufReader, Read, Write};

/// The largest payload one frame carries; a payload this long or longer
/// continues in the next frame.
pub const FRAME_PAYLOAD_BYTES_MAX: usize = 0xFF_FFFF;
/// Frame header: length and sequence id.
pub const HEADER_BYTES: usize = 4;
/// Output buffered before it is written even though the command is not
/// answered yet (a result set larger than this streams).
pub const OUT_BUFFER_BYTES_MAX: usize = 1 << 20;
/// Buffer capacity kept between commands; a larger one (after a large
/// result or statement) is given back so idle connections stay cheap.
pub const IDLE_BUFFER_BYTES_MAX: usize = 64 << 10;
/// The read buffer of a connection.
pub const READ_BUFFER_BYTES: usize = 8 << 10;
/// A packet frame of at most this many bytes is read into a buffer of its
/// size at once; a longer one grows its buffer as bytes arrive, so that a
/// header promising 16 MiB that never come costs no 16 MiB.
pub const PACKET_PREALLOC_BYTES_MAX: usize = 64 << 10;
const _: () = assert!(PACKET_PREALLOC_BYTES_MAX < FRAME_PAYLOAD_BYTES_MAX);

/// Why no packet was read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection between packets.
    Closed,
    /// The packet is longer than `max_allowed_packet` (its payload is not
    /// read: the stream cannot be trusted after it).
    TooLarge,
    /// A frame came with the wrong sequence id.
    OutOfOrder,
    /// The socket failed (or closed in the middle of a packet).
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(error: io::Error) -> ReadError {
        ReadError::Io(error)
    }
}

/// One connection's packet stream: reads packets and buffers the packets
/// of an answer.
pub struct PacketIo<S: Read + Write> {
    reader: BufReader<Tracked<S>>,
    out: Vec<u8>,
    /// Where the status flags of the OK and EOF packets still in `out`
    /// are, to be set once the backend's status is known.
    status_at: Vec<usize>,
    seq: u8,
    max_packet_bytes: usize,
}

impl<S: Read + Write> PacketIo<S> {
    /// A packet stream over `stream` that refuses packets longer than
    /// `max_packet_bytes`.
    pub fn new(stream: S, max_packet_bytes: usize) -> PacketIo<S> {
        assert!(max_packet_bytes > 0);
        PacketIo {
            reader: BufReader::with_capacity(
                READ_BUFFER_BYTES,
                Tracked {
                    stream,
                    drained: false,
                },
            ),
            out: Vec::new(),
            status_at: Vec::new(),
            seq: 0,
            max_packet_bytes,
        }
    }

    /// The next command starts a new sequence.
    pub fn reset_seq(&mut self) {
        self.seq = 0;
    }

    /// Reads one packet, joining continuation frames.
    pub fn read_packet(&mut self) -> Result<Vec<u8>, ReadError> {
        let mut payload = Vec::new();
        let mut first = true;
        loop {
            let mut header = [0u8; HEADER_BYTES];
            if !read_header(&mut self.reader, &mut header, first)? {
                return Err(ReadError::Closed);
            }
            first = false;
            let len =
                usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
            if header[3] != self.seq {
                return Err(ReadError::OutOfOrder);
            }
            self.seq = self.seq.wrapping_add(1);
            if payload.len() + len > self.max_packet_bytes {
                return Err(ReadError::TooLarge);
            }
            if len <= PACKET_PREALLOC_BYTES_MAX {
                // The common case (every statement of an OLTP client): one
                // allocation of the right size and one read.
                let at = payload.len();
                payload.resize(at + len, 0);
                self.reader.read_exact(&mut payload[at..])?;
                // Shorter than a whole frame: the packet's last.
                return Ok(payload);
            }
            // `take` + `read_to_end` grows the buffer as bytes arrive: a
            // header that promises 16 MiB and sends nothing allocates little.
            let read = self
                .reader
                .by_ref()
                .take(len as u64)
                .read_to_end(&mut payload)?;
            if read < len {
                return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
            }
            if len < FRAME_PAYLOAD_BYTES_MAX {
                return Ok(payload);
            }
        }
    }

    /// Starts a packet in the output buffer; its payload is appended to
    /// [`PacketIo::out`] and it ends with [`PacketIo::end`].
    pub fn begin(&mut self) -> usize {
        let at = self.out.len();
        self.out.extend_from_slice(&[0; HEADER_BYTES]);
        at
    }

    /// The output buffer, to append the payload of the packet begun.
    pub fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Ends the packet begun at `at`: writes its header (cutting it into
    /// frames when long), and writes the buffer out when it is full.
    pub fn end(&mut self, at: usize) -> io::Result<()> {
        assert!(at + HEADER_BYTES <= self.out.len());
        let len = self.out.len() - at - HEADER_BYTES;
        if len < FRAME_PAYLOAD_BYTES_MAX {
            self.out[at..at + 3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
            self.out[at + 3] = self.seq;
            self.seq = self.seq.wrapping_add(1);
        } else {
            let payload = self.out.split_off(at + HEADER_BYTES);
            self.out.truncate(at);
            let mut frames = payload.chunks(FRAME_PAYLOAD_BYTES_MAX);
            // An exact multiple of the frame size ends with an empty frame.
            let trailer: &[u8] = &[];
            let exact = payload.len().is_multiple_of(FRAME_PAYLOAD_BYTES_MAX);
            for frame in frames.by_ref().chain(exact.then_some(trailer)) {
                self.out
                    .extend_from_slice(&(frame.len() as u32).to_le_bytes()[..3]);
                self.out.push(self.seq);
                self.seq = self.seq.wrapping_add(1);
                self.out.extend_from_slice(frame);
                if self.out.len() >= OUT_BUFFER_BYTES_MAX {
                    self.flush()?;
                }
            }
        }
        if self.out.len() >= OUT_BUFFER_BYTES_MAX {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes one whole packet.
    pub fn write_packet(&mut self, payload: &[u8]) -> io::Result<()> {
        let at = self.begin();
        self.out.extend_from_slice(payload);
        self.end(at)
    }

    /// Remembers that the two bytes at `at` of the output buffer are
    /// status flags to be set by [`PacketIo::set_status`].
    pub fn mark_status(&mut self, at: usize) {
        assert!(at + 2 <= self.out.len());
        self.status_at.push(at);
    }

    /// Sets the status flags of the OK and EOF packets still buffered,
    /// keeping each one's `SERVER_MORE_RESULTS_EXISTS` and
    /// `SERVER_SESSION_STATE_CHANGED` (which say what follows in it).
    pub fn set_status(&mut self, flags: u16) {
        use crate::backend::status::{MORE_RESULTS_EXISTS, SESSION_STATE_CHANGED};
        let own = MORE_RESULTS_EXISTS | SESSION_STATE_CHANGED;
        for &at in &self.status_at {
            let old = u16::from_le_bytes([self.out[at], self.out[at + 1]]);
            let new = (old & own) | (flags & !own);
            self.out[at..at + 2].copy_from_slice(&new.to_le_bytes());
        }
        self.status_at.clear();
    }

    /// Writes the buffered packets out.
    pub fn flush(&mut self) -> io::Result<()> {
        self.status_at.clear();
        if self.out.is_empty() {
            return Ok(());
        }
        let stream = &mut self.reader.get_mut().stream;
        stream.write_all(&self.out)?;
        stream.flush()?;
        self.out.clear();
        Ok(())
    }

    /// Between commands: gives back buffer memory a large command took.
    pub fn shrink_idle(&mut self) {
        if self.out.capacity() > IDLE_BUFFER_BYTES_MAX {
            self.out = Vec::new();
        }
    }

    /// Whether bytes the client sent are already read into the buffer
    /// (a pipelined command): a poller waiting on the socket would not
    /// see them.
    pub fn has_buffered_input(&self) -> bool {
        !self.reader.buffer().is_empty()
    }

    /// Whether every byte the client sent so far is taken: nothing is
    /// buffered and the last read from the stream came back short (a
    /// thread pool parks such a connection without looking at its socket).
    pub fn drained(&self) -> bool {
        self.reader.buffer().is_empty() && self.reader.get_ref().drained
    }

    /// The payload of the next packet when the input holds all of it in
    /// one frame with the expected sequence id, reading from the stream
    /// only when nothing is buffered (once: a caller that knows the
    /// socket readable does not block); None otherwise (what was read
    /// stays buffered for [`PacketIo::read_packet`]).
    pub fn peek_packet(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            match self.reader.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        let buffered = self.reader.buffer();
        let Some(header) = buffered.get(..HEADER_BYTES) else {
            return Ok(None);
        };
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        if header[3] != self.seq || len >= FRAME_PAYLOAD_BYTES_MAX || len > self.max_packet_bytes {
            return Ok(None);
        }
        Ok(buffered.get(HEADER_BYTES..HEADER_BYTES + len))
    }

    /// The stream, for its socket options.
    pub fn stream_ref(&self) -> &S {
        &self.reader.get_ref().stream
    }

    /// The stream (tests read what was written).
    #[cfg(test)]
    pub fn stream(&mut self) -> &mut S {
        &mut self.reader.get_mut().stream
    }
}

/// A stream that notes whether its last read came back short (took all
/// that was there: for a socket, nothing is left in it at that moment).
struct Tracked<S> {
    stream: S,
    drained: bool,
}

impl<S: Read> Read for Tracked<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let result = self.stream.read(buf);
        // An error leaves the question open: the pool looks.
        self.drained = matches!(result, Ok(n) if n < buf.len());
        result
    }
}

/// Reads a frame header; false when the stream ended cleanly before it
/// (only allowed before a packet's first frame).
fn read_header<R: Read>(
    reader: &mut R,
    header: &mut [u8; HEADER_BYTES],
    first: bool,
) -> io::Result<bool> {
    let mut filled = 0;
    while filled < HEADER_BYTES {
        match reader.read(&mut header[filled..]) {
            Ok(0) if filled == 0 && first => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// A field of a payload was cut short or is not what it must be: the
/// packet is malformed (ERR 1835).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// Reads the fields of a payload, never past its end.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.buf.len() {
            return Err(Malformed);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// A fixed-length array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.bytes(N)?);
        Ok(array)
    }

    /// `int<1>`.
    pub fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.array::<1>()?[0])
    }

    /// `int<2>`.
    pub fn u16(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// `int<4>`.
    pub fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// `int<8>`.
    pub fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// `int<lenenc>` (0xFB, NULL, and 0xFF, an ERR marker, are malformed
    /// here).
    pub fn lenenc_int(&mut self) -> Result<u64, Malformed> {
        Ok(match self.u8()? {
            first @ 0..=0xfa => u64::from(first),
            0xfc => u64::from(self.u16()?),
            0xfd => {
                let [a, b, c] = self.array()?;
                u64::from(a) | u64::from(b) << 8 | u64::from(c) << 16
            }
            0xfe => self.u64()?,
            _ => return Err(Malformed),
        })
    }

    /// `string<lenenc>`.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let len = self.lenenc_int()?;
        let len = usize::try_from(len).map_err(|_| Malformed)?;
        self.bytes(len)
    }

    /// `string<NUL>`: up to the next NUL, which is consumed.
    pub fn nul_bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let end = self.buf.iter().position(|&b| b == 0).ok_or(Malformed)?;
        let value = &self.buf[..end];
        self.buf = &self.buf[end + 1..];
        Ok(value)
    }

    /// `string<NUL>`, or the rest when no NUL ends it (some clients leave
    /// the last field of the handshake unterminated).
    pub fn nul_or_rest(&mut self) -> &'a [u8] {
        match self.nul_bytes() {
            Ok(value) => value,
            Err(Malformed) => self.rest(),
        }
    }
}

/// `int<2>`.
pub fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// `int<4>`.
pub fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// `int<lenenc>`.
pub fn put_lenenc_int(out: &mut Vec<u8>, value: u64) {
    match value {
        0..=0xfa => out.push(value as u8),
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(value as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(value as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
}

/// `string<lenenc>`.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc_int(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `string<NUL>` (`bytes` must hold no NUL).
pub fn put_nul_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!(!bytes.contains(&0));
    out.extend_from_slice(bytes);
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testing::Duplex;

    fn io_over(input: Vec<u8>, max: usize) -> PacketIo<Duplex> {
        PacketIo::new(Duplex::new(input), max)
    }

    /// `drained` holds only once a read came back short and nothing is
    /// buffered: a pool parks such a connection without a look.
    #[test]
    fn drained_means_the_last_read_took_everything() {
        let packet = |len: usize| {
            let mut frame = vec![len as u8, (len >> 8) as u8, 0, 0];
            frame.resize(HEADER_BYTES + len, b'x');
            frame
        };
        let mut io = io_over(packet(5), usize::MAX);
        assert!(!io.drained(), "nothing read yet");
        io.read_packet().expect("a packet");
        assert!(io.drained());
        // Two packets in one read: the second stays buffered.
        let mut two = packet(5);
        two.extend(packet(6));
        let mut io = io_over(two, usize::MAX);
        io.read_packet().expect("a packet");
        assert!(!io.drained(), "a packet is buffered");
        io.reset_seq();
        io.read_packet().expect("a packet");
        assert!(io.drained());
        // A read that filled the buffer may have left input behind.
        let mut big = packet(READ_BUFFER_BYTES - HEADER_BYTES);
        big.extend(packet(1));
        let mut io = io_over(big, usize::MAX);
        io.read_packet().expect("a packet");
        assert!(!io.drained(), "the read filled the buffer");
    }

    #[test]
    fn lenenc_ints_round_trip_at_every_width_boundary() {
        for value in [
            0,
            250,
            251,
            0xffff,
            0x1_0000,
            0xff_ffff,
            0x100_0000,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_lenenc_int(&mut out, value);
            let mut cursor = Cursor::new(&out);
            assert_eq!(cursor.lenenc_int(), Ok(value));
            assert!(cursor.is_empty());
        }
        assert_eq!(Cursor::new(&[0xfb]).lenenc_int(), Err(Malformed));
        assert_eq!(Cursor::new(&[0xfc, 1]).lenenc_int(), Err(Malformed));
        assert_eq!(Cursor::new(&[3, b'a']).lenenc_bytes(), Err(Malformed));
    }

    #[test]
    fn a_long_payload_is_cut_into_frames_and_joined_again() {
        for len in [
            FRAME_PAYLOAD_BYTES_MAX - 1,
            FRAME_PAYLOAD_BYTES_MAX,
            FRAME_PAYLOAD_BYTES_MAX + 7,
            2 * FRAME_PAYLOAD_BYTES_MAX,
        ] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut writer = io_over(Vec::new(), usize::MAX);
            writer.reset_seq();
            writer.write_packet(&payload).unwrap();
            writer.flush().unwrap();
            let wire = std::mem::take(&mut writer.stream().output);
            let frames = len / FRAME_PAYLOAD_BYTES_MAX + 1;
            assert_eq!(wire.len(), len + frames * HEADER_BYTES, "len {len}");
            let mut reader = io_over(wire, usize::MAX);
            assert_eq!(reader.read_packet().unwrap(), payload);
            assert!(matches!(reader.read_packet(), Err(ReadError::Closed)));
        }
    }

    #[test]
    fn a_packet_over_the_limit_is_refused_before_its_payload_is_read() {
        let mut wire = vec![0xff, 0xff, 0xff, 0];
        wire.extend(std::iter::repeat_n(7u8, 100));
        let mut reader = io_over(wire, 1000);
        assert!(matches!(reader.read_packet(), Err(ReadError::TooLarge)));
    }

    #[test]
    fn a_frame_out_of_sequence_or_cut_short_is_an_error() {
        let mut reader = io_over(vec![1, 0, 0, 5, b'x'], 1000);
        assert!(matches!(reader.read_packet(), Err(ReadError::OutOfOrder)));
        let mut reader = io_over(vec![3, 0, 0, 0, b'x'], 1000);
        assert!(matches!(reader.read_packet(), Err(ReadError::Io(_))));
        let mut reader = io_over(vec![3, 0], 1000);
        assert!(matches!(reader.read_packet(), Err(ReadError::Io(_))));
    }

    #[test]
    fn status_flags_are_set_in_place_keeping_more_results() {
        use crate::backend::status::{AUTOCOMMIT, IN_TRANS, MORE_RESULTS_EXISTS};
        let mut io = io_over(Vec::new(), 100);
        let at = io.begin();
        io.out().extend_from_slice(&[0, 0]);
        io.mark_status(at + HEADER_BYTES);
        io.out()
            .extend_from_slice(&MORE_RESULTS_EXISTS.to_le_bytes());
        io.mark_status(at + HEADER_BYTES + 2);
        io.end(at).unwrap();
        io.set_status(IN_TRANS | AUTOCOMMIT);
        io.flush().unwrap();
        let wire = &io.stream().output;
        assert_eq!(
            &wire[HEADER_BYTES..HEADER_BYTES + 2],
            &(IN_TRANS | AUTOCOMMIT).to_le_bytes()
        );
        let both = IN_TRANS | AUTOCOMMIT | MORE_RESULTS_EXISTS;
        assert_eq!(&wire[HEADER_BYTES + 2..], &both.to_le_bytes());
    }
}
