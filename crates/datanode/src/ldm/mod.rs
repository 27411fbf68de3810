//! The LDM block (NDB: DBLQH with DBACC, DBTUP, DBTUX): one instance per
//! `ldm` thread, each running one `storage::ldm::LdmInstance`. Being built
//! for issue 4; see `docs/transactions.md`.
