//! hash_index (being written)
