//! Signals: the only way blocks talk, inside a node and between nodes.
//!
//! A signal is a typed message ([`Signal`], [`SignalBody`]) from one block
//! instance ([`BlockRef`]) to another. Between processes signals travel in
//! frames ([`frame`]): versioned, length-prefixed and CRC32C-checksummed.
//! The decoder validates every length and field, never panics and never
//! allocates more than the bytes it was given; the property tests in
//! `tests/decode.rs` feed it random and truncated input.

pub mod buffers;
pub mod codec;
pub mod dbinfo;
pub mod frame;
pub mod ids;
pub mod key_batch;
pub mod signals;

pub use frame::{decode_frame, encode_frame, EncodeError, FrameRef, FrameWriter};
pub use ids::{BlockNumber, BlockRef, Chain, NodeBitmask, NodeId, RefChain, CHAIN_MAX};
pub use signals::*;

/// Skarv's version as carried in registration signals: `major * 10000 + minor * 100 + patch`.
pub const VERSION: u32 = 1_00;

/// Renders a version number as `major.minor.patch`.
pub fn version_string(version: u32) -> String {
    format!(
        "{}.{}.{}",
        version / 10000,
        (version / 100) % 100,
        version % 100
    )
}

/// Why bytes from the network were refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("bad frame magic {0:02x?} (expected \"SK\")")]
    BadMagic([u8; 2]),
    #[error("unsupported wire version {0} (this build speaks {wire})", wire = frame::WIRE_VERSION)]
    UnsupportedVersion(u8),
    #[error("frame payload of {bytes} bytes exceeds the limit of {max}")]
    FrameTooLarge { bytes: usize, max: usize },
    #[error(
        "frame checksum mismatch (header says {expected:#010x}, payload gives {actual:#010x})"
    )]
    ChecksumMismatch { expected: u32, actual: u32 },
    #[error("truncated: needed {needed} bytes, {available} left")]
    Truncated { needed: usize, available: usize },
    #[error("unknown signal number {0}")]
    UnknownGsn(u16),
    #[error("invalid {field}: {value}")]
    BadValue { field: &'static str, value: u64 },
    #[error("string is not valid UTF-8")]
    BadUtf8,
    #[error("{bytes} unexpected bytes after signal {gsn}")]
    TrailingBytes { gsn: u16, bytes: usize },
    #[error("signal #{index} of the frame: {source}")]
    InSignal {
        index: usize,
        source: Box<DecodeError>,
    },
}

/// Epochs: a commit's 64-bit position, `(gci_hi << 32) | gci_lo`. `gci_hi`
/// is the global checkpoint (the unit of durability: redo, local
/// checkpoints, sysfile, `TcWaitGciReq`), `gci_lo` counts the micro-GCPs
/// run inside it every `TimeBetweenEpochs` (docs/transactions.md, "Global
/// checkpoints").
pub mod epoch {
    /// The epoch `(hi, lo)`.
    pub const fn make(hi: u32, lo: u32) -> u64 {
        ((hi as u64) << 32) | lo as u64
    }

    /// Its global checkpoint.
    pub const fn hi(epoch: u64) -> u32 {
        (epoch >> 32) as u32
    }

    /// Its micro-GCP within the global checkpoint.
    pub const fn lo(epoch: u64) -> u32 {
        epoch as u32
    }
}
