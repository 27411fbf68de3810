//! memory (being written)
