//! Expressions: Skarv's own tree lowered from the parser's, and their
//! evaluation with MySQL's types, coercions and NULL semantics.
//!
//! (Stub: filled in by the query work of issue 20.)
