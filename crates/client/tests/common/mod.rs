//! The client tests' sandbox: `testkit::sandbox`.

pub use testkit::sandbox::*;
