//! schema (being written)
