//! The distribution block (NDB: DBDIH): the global checkpoint protocol.
//! Being built for issue 4; see `docs/transactions.md`.
