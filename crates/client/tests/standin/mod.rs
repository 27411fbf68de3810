//! What the client tests' data node stand-ins share: reading the
//! client's frames, and a real management server with their config.
#![allow(dead_code)] // each test file uses its own part

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mgmd::{MgmServer, ServerOptions};
use signal::{
    decode_frame, encode_frame, BlockNumber, BlockRef, NodeBitmask, NodeId, Signal, SignalBody,
    VERSION,
};
use skarv_client::schema_types::{Column, ColumnType, TableDef};

/// The heartbeat interval a stand-in gives its API nodes, in ms: longer
/// than any test. Tests count the writes a connection makes, and a
/// heartbeat would be one more (on a loaded machine a 100 ms interval fell
/// inside a count).
pub const STANDIN_HEARTBEAT_MS: u32 = 600_000;

/// A table of two BIGINT columns `k` (the key) and `v`, one partition,
/// version 1: what a stand-in's dictionary holds.
pub fn kv_table_def(name: &str, id: u32) -> TableDef {
    let mut def = TableDef::new(
        name,
        id,
        vec![
            Column::new("k", ColumnType::BigInt { unsigned: false }),
            Column::new("v", ColumnType::BigInt { unsigned: false }),
        ],
    )
    .primary_key(vec![0])
    .partitions(1)
    .build()
    .expect("valid table");
    def.version = 1;
    def
}

/// A stand-in's answer to `ApiRegReq`: started, no heartbeat within a
/// test.
pub fn registered() -> SignalBody {
    SignalBody::ApiRegConf {
        version: VERSION,
        started: true,
        view_id: 1,
        members: NodeBitmask::new(),
        heartbeat_interval_ms: STANDIN_HEARTBEAT_MS,
    }
}

/// Reads the client's hello on `stream` and answers it as data node `me`
/// (`buffer` keeps what came after it); None when the client closed.
pub fn greet(stream: &mut TcpStream, buffer: &mut Vec<u8>, me: NodeId) -> Option<()> {
    let hello = read_frame(stream, buffer)?;
    let SignalBody::TransportHello { from, .. } = hello[0].body else {
        panic!("hello first")
    };
    let reply = Signal {
        receiver: BlockRef::new(from, BlockNumber::PROCESS, 0),
        sender: BlockRef::new(me, BlockNumber::PROCESS, 0),
        body: SignalBody::TransportHello {
            from: me,
            to: from,
            version: VERSION,
        },
    };
    let mut out = Vec::new();
    encode_frame(&[reply], &mut out).expect("encodes");
    stream.write_all(&out).expect("hello sent");
    Some(())
}

/// Starts a management server on an ephemeral port with `config` (a
/// config.ini) written into `dir`, its data under `dir/mgmd`.
pub fn start_mgmd(dir: &Path, config: &str) -> MgmServer {
    let config_path = dir.join("config.ini");
    std::fs::write(&config_path, config).expect("config written");
    MgmServer::start(ServerOptions {
        config_path,
        port: Some(0),
        data_dir: Some(dir.join("mgmd")),
        node_id: None,
        metrics_port: None,
    })
    .expect("mgmd starts")
}

/// Reads the next frame's signals from `stream` (`buffer` keeps what came
/// after it); None when the client closed the connection.
pub fn read_frame(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Vec<Signal>> {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some((frame, used)) = decode_frame(buffer).expect("valid frame from the client") {
            let signals = frame.signals().map(|s| s.expect("valid signal")).collect();
            buffer.drain(..used);
            return Some(signals);
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// One data node stand-in on loopback and a real management server whose
/// config names it; the scratch directory goes with it.
pub struct Standin {
    _server: MgmServer,
    /// The management server's address, to connect a cluster to.
    pub connect: String,
    dir: PathBuf,
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a stand-in for data node `data_node` (one replica), each
/// connection to it served by `serve` on a thread of its own, and a
/// management server with API slots `api_nodes`; `name` names the
/// scratch directory.
pub fn start_standin(
    name: &str,
    data_node: u8,
    api_nodes: &[u8],
    serve: impl Fn(TcpStream) + Send + Sync + 'static,
) -> Standin {
    let dir = std::env::temp_dir().join(format!("skarv-client-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let serve = Arc::clone(&serve);
            std::thread::spawn(move || serve(stream));
        }
    });
    let apis: String = api_nodes
        .iter()
        .map(|id| format!("[api]\nNodeId={id}\n"))
        .collect();
    let config = format!(
        "[ndbd default]\nNoOfReplicas=1\nDataMemory=64M\n\n[ndb_mgmd]\nNodeId=1\nHostName=127.0.0.1\nDataDir={d}\n\n\
         [ndbd]\nNodeId={data_node}\nHostName=127.0.0.1\nServerPort={port}\nDataDir={d}/2\n\n{apis}",
        d = dir.display()
    );
    let server = start_mgmd(&dir, &config);
    let connect = server.local_addr().to_string();
    Standin {
        _server: server,
        connect,
        dir,
    }
}
