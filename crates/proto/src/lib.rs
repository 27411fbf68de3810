//! What API nodes and data nodes exchange inside transaction signals.
//!
//! Transaction signals (`TcKeyReq`, `LdmKeyReq`, their confirms, the scan
//! signals) carry their operations and results as one byte buffer each, in
//! the formats defined here, so that a batch of N operations costs one
//! allocation, not N, and readers parse in place: a value read from a batch
//! is a [`schema::ValueRef`] borrowing the buffer. The client writes
//! op batches and reads results; the transaction coordinator reads op
//! batches and writes per-LDM batches (copying an op's key and value bytes
//! without re-encoding them); the LDM reads those and writes results.
//!
//! Every reader checks every length against the bytes present and answers
//! bad input with a [`ProtoError`], never a panic: a malformed buffer from
//! the network is a clear error, not a crash. All integers are little-endian.
//! Each module documents its format byte by byte.
//!
//! - [`value`]: one tagged value, and the tiny bounds-checked [`Reader`].
//! - [`ops`]: op batches (key operations).
//! - [`results`]: per-op results.
//! - [`scan`]: scan specifications and batches of scanned rows.
//! - [`filter`]: pushed-down scan filters and their SQL evaluation.
//! - [`query`]: query trees of pushed joins.
//! - [`error`]: NDB-style error codes with their class and message.

pub mod error;
pub mod filter;
pub mod ops;
mod proto_error;
pub mod query;
pub mod results;
pub mod scan;
pub mod value;

pub use error::ErrorClass;
pub use filter::{CmpOp, Filter, FILTER_DEPTH_MAX, FILTER_NODES_MAX};
pub use ops::set_partition;
pub use ops::{
    CheckPlan, LockMode, LockWait, OpBatchReader, OpBatchWriter, OpHeader, OpKind, OpSpan, OpView,
    BATCH_BYTES_MAX, IGNORE_ERROR, KEY_INFO, NO_INDEX, NO_PARTITION, NO_WAIT, OPS_PER_BATCH_MAX,
    SKIP_LOCKED, UNLOCK,
};
pub use proto_error::ProtoError;
pub use query::{KeySource, QueryChild, QueryTree, QUERY_BATCH_ROWS_MAX, QUERY_CHILDREN_MAX};
pub use results::{OpResult, ResultReader, ResultWriter};
pub use scan::{Bound, RowBatchReader, RowBatchWriter, RowView, ScanSpec};
pub use value::{check_value, get_value, put_value, Reader};
