//! [`Error`]: what the native API returns when something fails.
//!
//! Every error carries an NDB-style numeric code from `proto::error`, its
//! class (may a retry help?) and a message that names what was involved
//! (table, column, node, key). Errors found on the client (bad input) and
//! errors sent by a data node look alike, so an application handles them
//! in one place.

use std::fmt;

pub use proto::ErrorClass;
use proto::ProtoError;

/// An error of the native API (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The numeric code (`proto::error`); NDB's number where NDB has one.
    pub code: u32,
    /// Temporary (retry), permanent, or unknown result (it may have committed).
    pub class: ErrorClass,
    /// What happened, naming the table, column or node involved.
    pub message: String,
    /// The operation of the executed batch that failed, by its index in
    /// the batch (NDB's `getNdbErrorOperation`), when one did.
    pub op: Option<u32>,
}

/// `Result` with the native API's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with `code`'s class from `proto::error` and this message.
    pub fn new(code: u32, message: impl Into<String>) -> Error {
        Error {
            code,
            class: proto::error::class(code),
            message: message.into(),
            op: None,
        }
    }

    /// The same error, naming the failed operation of the batch.
    pub(crate) fn at_op(mut self, op: u32) -> Error {
        self.op = Some(op);
        self
    }

    /// An error with the code's default message followed by `context`.
    pub fn with_context(code: u32, context: impl fmt::Display) -> Error {
        Error::new(code, format!("{}: {context}", proto::error::message(code)))
    }

    /// Whether retrying the transaction may succeed.
    pub fn is_temporary(&self) -> bool {
        self.class == ErrorClass::Temporary
    }

    /// Whether the transaction may or may not have committed.
    pub fn is_unknown_result(&self) -> bool {
        self.class == ErrorClass::UnknownResult
    }

    /// Whether retrying will fail the same way.
    pub fn is_permanent(&self) -> bool {
        self.class == ErrorClass::Permanent
    }

    /// A misuse of the API (a call in the wrong state): permanent.
    pub(crate) fn usage(message: impl Into<String>) -> Error {
        Error::new(proto::error::BAD_OPERATION, message)
    }
}

impl From<ProtoError> for Error {
    fn from(error: ProtoError) -> Error {
        Error::new(error.code(), error.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = match self.class {
            ErrorClass::Temporary => "temporary",
            ErrorClass::Permanent => "permanent",
            ErrorClass::UnknownResult => "unknown result",
        };
        write!(f, "error {} ({class}): {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_come_from_proto() {
        let lock = Error::new(proto::error::LOCK_TIMEOUT, "t");
        assert!(lock.is_temporary());
        let missing = Error::new(proto::error::NO_SUCH_ROW, "t");
        assert!(missing.is_permanent());
        let node = Error::new(proto::error::NODE_FAILURE, "t");
        assert!(node.is_unknown_result());
        assert!(node.to_string().contains("4010"));
        assert!(node.to_string().contains("unknown result"));
    }
}
