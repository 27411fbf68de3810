//! locks (being written)
