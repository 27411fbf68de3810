//! `skarv sql`: a SQL node (NDB's `mysqld` of a cluster), an API node that
//! serves MySQL's client/server protocol over the native API.

use std::net::IpAddr;

/// MySQL's default port.
const PORT_DEFAULT: u16 = 3306;
/// Loopback: a SQL node is reachable from other machines only when asked.
const BIND_DEFAULT: &str = "127.0.0.1";
/// The SQL node's default `max_connections` (above MySQL's 151: idle
/// connections are cheap here, and 1,000 of them must be served).
const MAX_CONNECTIONS_DEFAULT: u32 = sql::MAX_CONNECTIONS_DEFAULT;
/// More than any one process can hold open (file descriptors).
const MAX_CONNECTIONS_MAX: u32 = 100_000;

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
}

pub fn run(args: SqlArgs) -> Result<(), String> {
    let options = sql::ServerOptions {
        connect: args.connect,
        bind: args.bind,
        port: args.port,
        node_id: args.node_id,
        max_connections: args.max_connections,
        slow_query_log_file: args.slow_query_log_file,
    };
    let listen = format!("{}:{}", options.bind, options.port);
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
