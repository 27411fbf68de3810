//! datanode
