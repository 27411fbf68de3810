//! `skarv restore`: loads a backup into a running cluster (see
//! [`crate::backup::restore`]).

use clap::Args;

use crate::backup::restore::{
    restore, RestoreOptions, RESTORE_BATCH_ROWS_DEFAULT, RESTORE_PARALLEL_DEFAULT,
};

#[derive(Args)]
pub struct RestoreArgs {
    /// The target cluster's management server, `host:port`.
    #[arg(long, default_value = "localhost:1186", value_name = "HOST:PORT")]
    connect: String,
    /// The backup's directory (`.../BACKUP-<id>`).
    #[arg(long, value_name = "DIR")]
    backup: std::path::PathBuf,
    /// Restore only these tables, `db.t` as SQL shows them (a name without
    /// a dot is a native table's); comma-separated or repeated.
    #[arg(long, value_delimiter = ',', value_name = "DB.T")]
    tables: Vec<String>,
    /// Restore database `a`'s tables into database `b` (repeatable).
    #[arg(long = "rename-db", value_name = "A=B")]
    rename_db: Vec<String>,
    /// Create the tables from the backup's schema first (they must not exist).
    #[arg(long)]
    restore_meta: bool,
    /// Transactions in flight, one session each.
    #[arg(long, default_value_t = RESTORE_PARALLEL_DEFAULT)]
    parallel: usize,
    /// Rows per transaction.
    #[arg(long, default_value_t = RESTORE_BATCH_ROWS_DEFAULT)]
    batch: usize,
}

pub fn run(args: RestoreArgs) -> Result<(), String> {
    crate::init_logging();
    let rename_db = args
        .rename_db
        .iter()
        .map(|r| {
            r.split_once('=')
                .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .ok_or_else(|| format!("--rename-db {r}: expected FROM=TO"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let restored = restore(&RestoreOptions {
        connect: args.connect,
        backup: args.backup,
        tables: args.tables,
        rename_db,
        restore_meta: args.restore_meta,
        parallel: args.parallel,
        batch_rows: args.batch,
    })?;
    println!(
        "Restored {} tables at epoch {}: {} rows written, {} deleted.",
        restored.tables, restored.stop_epoch, restored.rows_written, restored.rows_deleted
    );
    Ok(())
}
