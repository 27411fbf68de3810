//! The socket under one link: TCP, or a Unix-domain stream socket between
//! two nodes on the same host (Skarv's stand-in for NDB's shared-memory
//! transporter, `UseShm`).
//!
//! Why a local socket: on loopback a message still goes through the whole
//! TCP stack (segmentation, the loopback device, the softirq that receives
//! it), which a Unix socket skips. It pays where a message wakes a thread:
//! a 2-replica update one at a time crosses the data nodes' link twice and
//! took 7–16 % less time over it (docs/architecture.md, "Transport"); where
//! frames are batched or both ends spin it changes little.
//!
//! Which socket: a node that listens on `ip:port` also listens on the
//! abstract Unix address `skarv/transport/ip:port` (Linux's abstract
//! namespace: no file to create, clean up or outlive the process). A node
//! connecting to a loopback `ip:port` tries that name first and takes TCP
//! when nobody listens there. The name mirrors TCP's own rule: only the
//! process that holds `ip:port` in this network namespace can hold the
//! name, so both roads lead to the same process, and the hello that follows
//! checks the node id either way. A listener on the unspecified address
//! (`0.0.0.0:port`) takes the name of `127.0.0.1:port`, the address a local
//! peer connects to.

use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;

use mio::event::Source;
use mio::{Interest, Registry, Token};

/// Which kind of socket a link runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Tcp,
    /// A Unix-domain socket to a node on the same host.
    Local,
}

impl LinkKind {
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Tcp => "tcp",
            LinkKind::Local => "local",
        }
    }

    /// As ndbinfo's `transporters.type` shows it.
    pub fn ndbinfo_name(self) -> &'static str {
        match self {
            LinkKind::Tcp => "TCP",
            LinkKind::Local => "UNIX",
        }
    }
}

/// A connected (or connecting) stream socket of either kind.
#[derive(Debug)]
pub enum Stream {
    Tcp(mio::net::TcpStream),
    Local(mio::net::UnixStream),
}

/// The abstract Unix address that mirrors the TCP address `addr`.
pub fn local_address(addr: SocketAddr) -> io::Result<std::os::unix::net::SocketAddr> {
    let addr = if addr.ip().is_unspecified() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
    } else {
        addr
    };
    std::os::unix::net::SocketAddr::from_abstract_name(format!("skarv/transport/{addr}"))
}

/// Whether a node connecting to `addr` may find its peer on a local socket.
pub fn may_be_local(addr: SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// `$body` with `$s` bound to the socket, whichever kind it is (the
/// calls that mean the same on both).
macro_rules! on_socket {
    ($stream:expr, $s:ident => $body:expr) => {
        match $stream {
            Stream::Tcp($s) => $body,
            Stream::Local($s) => $body,
        }
    };
}

impl Stream {
    /// Starts a non-blocking connect to `addr`: over the local socket when
    /// `try_local` and `addr` is on loopback and a node listens there, else
    /// over TCP. A local connect is complete or refused at once.
    pub fn connect(addr: SocketAddr, try_local: bool) -> io::Result<Stream> {
        if try_local && may_be_local(addr) {
            if let Ok(stream) = mio::net::UnixStream::connect_addr(&local_address(addr)?) {
                return Ok(Stream::Local(stream));
            }
        }
        mio::net::TcpStream::connect(addr).map(Stream::Tcp)
    }

    /// Wraps a connected blocking or non-blocking std socket (made
    /// non-blocking here).
    pub fn from_std_tcp(stream: std::net::TcpStream) -> io::Result<Stream> {
        stream.set_nonblocking(true)?;
        Ok(Stream::Tcp(mio::net::TcpStream::from_std(stream)))
    }

    pub fn kind(&self) -> LinkKind {
        match self {
            Stream::Tcp(_) => LinkKind::Tcp,
            Stream::Local(_) => LinkKind::Local,
        }
    }

    /// A second handle on the same socket (for a writer beside a reader).
    pub fn try_clone(&self) -> io::Result<Stream> {
        let fd: OwnedFd = self.as_fd().try_clone_to_owned()?;
        Ok(match self {
            Stream::Tcp(_) => Stream::Tcp(mio::net::TcpStream::from_std(fd.into())),
            Stream::Local(_) => Stream::Local(mio::net::UnixStream::from_std(fd.into())),
        })
    }

    /// Whether a connect started by [`Stream::connect`] has completed
    /// (false while it is in progress; an error if it failed).
    pub fn is_connected(&self) -> io::Result<bool> {
        if let Some(error) = self.take_error()? {
            return Err(error);
        }
        let peer = on_socket!(self, s => s.peer_addr().map(drop));
        match peer {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Small frames go out at once: TCP_NODELAY on TCP (a local socket
    /// never delays).
    pub fn set_nodelay(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(true),
            Stream::Local(_) => Ok(()),
        }
    }

    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        on_socket!(self, s => s.take_error())
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        on_socket!(self, s => s.shutdown(how))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        on_socket!(self, s => s.read(buf))
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        on_socket!(self, s => s.write(buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        on_socket!(self, s => s.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        on_socket!(self, s => s.as_fd())
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl Source for Stream {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        on_socket!(self, s => s.register(registry, token, interest))
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        on_socket!(self, s => s.reregister(registry, token, interest))
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        on_socket!(self, s => s.deregister(registry))
    }
}

/// Where a connection's peer is, for logs: its TCP address, or the local
/// socket of the TCP address it mirrors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerAddr {
    Tcp(SocketAddr),
    Local(SocketAddr),
}

impl std::fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAddr::Tcp(addr) => write!(f, "{addr}"),
            PeerAddr::Local(addr) => write!(f, "local socket of {addr}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_address_connects_locally_when_a_node_listens_there() {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = tcp.local_addr().expect("address");
        // Nobody on the local name yet: TCP.
        let stream = Stream::connect(addr, true).expect("connect");
        assert_eq!(stream.kind(), LinkKind::Tcp);
        let local =
            std::os::unix::net::UnixListener::bind_addr(&local_address(addr).expect("name"))
                .expect("bind the local name");
        let stream = Stream::connect(addr, true).expect("connect");
        assert_eq!(stream.kind(), LinkKind::Local);
        let (mut accepted, _) = local.accept().expect("accept");
        let mut stream = stream;
        stream.write_all(b"hello").expect("write");
        let mut got = [0u8; 5];
        accepted.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"hello");
        // Told not to: TCP even with the local name there.
        assert_eq!(
            Stream::connect(addr, false).expect("connect").kind(),
            LinkKind::Tcp
        );
    }

    #[test]
    fn the_unspecified_address_takes_loopbacks_name() {
        let any: SocketAddr = "0.0.0.0:4000".parse().expect("address");
        let lo: SocketAddr = "127.0.0.1:4000".parse().expect("address");
        let name = |a| {
            local_address(a)
                .expect("name")
                .as_abstract_name()
                .map(<[u8]>::to_vec)
        };
        assert_eq!(name(any), name(lo));
        assert_eq!(
            name(lo).as_deref(),
            Some(&b"skarv/transport/127.0.0.1:4000"[..])
        );
        assert!(!may_be_local("10.1.2.3:4000".parse().expect("address")));
    }
}
