//! The SQL engine tests' sandbox: `testkit::sandbox`.

pub use testkit::sandbox::*;
