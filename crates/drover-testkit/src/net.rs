//! Free loopback ports, for servers that must be given a port up front
//! (child processes; in-process servers bind port 0 instead, see
//! [`crate::loopback_options`]).

use std::net::TcpListener;

/// A free loopback port (the listener that found it is closed again).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `n` distinct free loopback ports. The listeners are held until all ports
/// are chosen so that no port is picked twice; the server binds with
/// SO_REUSEADDR.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}
