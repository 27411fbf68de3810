//! `skarv sql`: a SQL node (NDB's `mysqld` of a cluster), an API node that
//! serves MySQL's client/server protocol over the native API.

use std::net::IpAddr;

/// MySQL's default port.
const PORT_DEFAULT: u16 = 3306;
/// Loopback: a SQL node is reachable from other machines only when asked.
const BIND_DEFAULT: &str = "127.0.0.1";
/// The SQL node's default `max_connections` (above MySQL's 151: idle
/// connections are cheap here, and 8,192 of them must be served).
const MAX_CONNECTIONS_DEFAULT: u32 = sql::MAX_CONNECTIONS_DEFAULT;
/// More than any one process can hold open (file descriptors).
const MAX_CONNECTIONS_MAX: u32 = sql::MAX_CONNECTIONS_MAX;

#[derive(clap::Args, Debug)]
pub struct SqlArgs {
    /// The management server, as host:port.
    #[arg(long, default_value = "localhost:1186", value_name = "HOST:PORT")]
    pub connect: String,
    /// Port for MySQL clients.
    #[arg(long, default_value_t = PORT_DEFAULT)]
    pub port: u16,
    /// Address to listen on (0.0.0.0 for every interface).
    #[arg(long, default_value = BIND_DEFAULT)]
    pub bind: IpAddr,
    /// The `[mysqld]` or `[api]` slot of config.ini to take (1–255); by
    /// default the management server picks a free one.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=255))]
    pub node_id: Option<u16>,
    /// Most client connections at once (MySQL's max_connections).
    #[arg(long, default_value_t = MAX_CONNECTIONS_DEFAULT,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CONNECTIONS_MAX)))]
    pub max_connections: u32,
    /// The slow query log's file (MySQL's slow_query_log_file); by default
    /// `<host>-slow.log` in the working directory. Off until `SET GLOBAL
    /// slow_query_log = ON`.
    #[arg(long, value_name = "PATH")]
    pub slow_query_log_file: Option<std::path::PathBuf>,
    /// Cluster connections (API nodes) of this SQL node; by default the
    /// CPUs up to 4, or more when max_connections needs more sessions
    /// (4,096 per connection).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=sql::CONNECTION_POOL_MAX as i64))]
    pub ndb_cluster_connection_pool: Option<u16>,
    /// Node ids of the cluster connections, comma-separated (the first
    /// replaces --node-id); the pool is at least as many.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..=255))]
    pub ndb_cluster_connection_pool_nodeids: Vec<u16>,
    /// How connections get threads: pool-of-threads (a thread pool; idle
    /// connections hold no thread) or one-thread-per-connection.
    #[arg(long, default_value = "pool-of-threads", value_parser = parse_thread_handling)]
    pub thread_handling: sql::ThreadHandling,
    /// Thread groups of the thread pool (each runs about one statement at
    /// a time); by default the CPUs.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub thread_pool_size: Option<u16>,
    /// Most threads of the thread pool.
    #[arg(long, default_value_t = 65_536,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub thread_pool_max_threads: u32,
    /// Milliseconds after which a statement that still runs lets its
    /// thread group start another.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=4_294_967_295))]
    pub thread_pool_stall_limit: u64,
    /// Run the SQL node's threads under the OS's batch policy (Linux
    /// SCHED_BATCH): a thread woken by a client or a data node does not
    /// preempt the one running, which finishes its batch first. Pays on a
    /// host whose few CPUs the SQL node shares with its data node (with
    /// the data node's BatchScheduling=1) and its clients.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, value_name = "true|false")]
    pub batch_scheduling: bool,
    /// The only directory whose files LOAD DATA INFILE reads on this host
    /// (MySQL's secure_file_priv); by default any file the process may
    /// read, for accounts with SUPER. LOAD DATA LOCAL is not limited.
    #[arg(long, value_name = "DIR")]
    pub secure_file_priv: Option<std::path::PathBuf>,
}

fn parse_thread_handling(text: &str) -> Result<sql::ThreadHandling, String> {
    sql::ThreadHandling::from_name(text)
        .ok_or_else(|| "use pool-of-threads or one-thread-per-connection".to_owned())
}

pub fn run(args: SqlArgs) -> Result<(), String> {
    // As in MySQL, a list of node ids sets the pool's size.
    let listed = args.ndb_cluster_connection_pool_nodeids.len();
    let pool = match (args.ndb_cluster_connection_pool.map(usize::from), listed) {
        (Some(pool), 0) => pool,
        (None, 0) => sql::connection_pool_default(args.max_connections),
        (None, listed) => listed,
        (Some(pool), listed) if pool == listed => pool,
        (Some(pool), listed) => {
            return Err(format!(
                "--ndb-cluster-connection-pool {pool} and the {listed} node ids of \
                 --ndb-cluster-connection-pool-nodeids differ"
            ))
        }
    };
    let mut node_ids = args.ndb_cluster_connection_pool_nodeids.into_iter();
    let node_id = match (args.node_id, node_ids.next()) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!(
                "--node-id {a} and the first of --ndb-cluster-connection-pool-nodeids ({b}) differ"
            ))
        }
        (a, b) => a.or(b),
    };
    let rest: Vec<u16> = node_ids.collect();
    let options = sql::ServerOptions {
        connect: args.connect,
        bind: args.bind,
        port: args.port,
        node_id,
        max_connections: args.max_connections,
        slow_query_log_file: args.slow_query_log_file,
        connection_pool: pool,
        connection_pool_node_ids: rest,
        thread_handling: args.thread_handling,
        thread_pool_size: args
            .thread_pool_size
            .map_or_else(sql::thread_pool_size_default, usize::from),
        thread_pool_max_threads: args.thread_pool_max_threads as usize,
        thread_pool_stall_limit_ms: args.thread_pool_stall_limit,
        secure_file_priv: match args.secure_file_priv {
            Some(dir) => Some(
                std::fs::canonicalize(&dir)
                    .map_err(|e| format!("--secure-file-priv {}: {e}", dir.display()))?,
            ),
            None => None,
        },
    };
    let listen = format!("{}:{}", options.bind, options.port);
    if args.batch_scheduling {
        // Before the server starts its threads: they inherit the policy.
        kernel::runtime::use_batch_scheduling("sql");
    }
    sql::serve(options).map_err(|error| format!("SQL node on {listen}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sql: SqlArgs,
    }

    fn parse(arguments: &[&str]) -> Result<SqlArgs, clap::Error> {
        let mut all = vec!["sql"];
        all.extend_from_slice(arguments);
        Cli::try_parse_from(all).map(|cli| cli.sql)
    }

    #[test]
    fn defaults_are_mysqls_on_loopback_with_more_connections() {
        let args = parse(&[]).expect("no flags parse");
        assert_eq!(args.port, 3306);
        assert_eq!(args.bind, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(args.node_id, None);
        assert_eq!(args.max_connections, sql::MAX_CONNECTIONS_DEFAULT);
        assert_eq!(args.connect, "localhost:1186");
        assert!(!args.batch_scheduling);
        let args = parse(&["--batch-scheduling", "true"]).expect("parses");
        assert!(args.batch_scheduling);
    }

    #[test]
    fn node_ids_and_limits_are_checked() {
        let args =
            parse(&["--node-id", "7", "--port", "29001", "--bind", "0.0.0.0"]).expect("parses");
        assert_eq!(args.node_id, Some(7));
        assert_eq!(args.port, 29001);
        for bad in [
            &["--node-id", "0"][..],
            &["--node-id", "256"],
            &["--max-connections", "0"],
            &["--bind", "localhost:1"],
            &["--port", "70000"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
