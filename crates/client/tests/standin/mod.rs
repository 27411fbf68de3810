//! What the client tests' data node stand-ins share: reading the
//! client's frames, and a real management server with their config.

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;

use mgmd::{MgmServer, ServerOptions};
use signal::{decode_frame, Signal};

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
