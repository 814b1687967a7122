//! A TCP relay on an ephemeral loopback port that a test can cut and heal:
//! a network partition between an agent (or client) and a member, in one
//! process. Bytes pass through untouched (TLS included: clients check the
//! member's certificate name, not its address).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A relay to one address. Dropping it stops it and closes what it relays.
pub struct CuttableLink {
    /// Where to connect instead of the target.
    pub addr: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    target: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl CuttableLink {
    /// Relays connections to `target` from a new loopback port.
    pub async fn start(target: &str) -> CuttableLink {
        let link = Self::bind().await;
        link.point_to(target);
        link
    }

    /// A relay on a new loopback port whose target is given later
    /// ([`CuttableLink::point_to`]): a member can advertise the relay's
    /// address before it has one of its own. Until then connections are
    /// closed at once.
    pub async fn bind() -> CuttableLink {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (cut, _) = watch::channel(false);
        let cut = Arc::new(cut);
        let target = Arc::new(Mutex::new(String::new()));
        let watcher = cut.clone();
        let to = target.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let target = to.lock().map(|t| t.clone()).unwrap_or_default();
                if *watcher.borrow() || target.is_empty() {
                    // Cut: the connection is refused (closed at once).
                    continue;
                }
                let mut rx = watcher.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = rx.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        CuttableLink {
            addr,
            cut,
            target,
            task,
        }
    }

    /// Relays to `target` from now on.
    pub fn point_to(&self, target: &str) {
        if let Ok(mut t) = self.target.lock() {
            *t = target.to_string();
        }
    }

    /// The relay's address as a `host:port` string.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Closes every relayed connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Relays again.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for CuttableLink {
    fn drop(&mut self) {
        self.cut.send_replace(true);
        self.task.abort();
    }
}
