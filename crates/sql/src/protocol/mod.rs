//! MySQL's client/server protocol (the wire side of the SQL node).
//!
//! (Stub: filled in by the protocol work of issue 20.)
