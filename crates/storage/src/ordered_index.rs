//! ordered_index (being written)
