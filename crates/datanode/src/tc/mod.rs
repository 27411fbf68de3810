//! The transaction coordinator block (NDB: DBTC). Being built for issue 4;
//! see `docs/transactions.md`.
