//! A TCP relay on an ephemeral loopback port that a test can cut and heal:
//! a network partition between an agent (or client) and a member, in one
//! process. Bytes pass through untouched (TLS included: clients check the
//! member's certificate name, not its address).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the relay does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Relay,
    /// New connections are closed at once, relayed ones closed.
    Refuse,
    /// A network that drops every packet: new connections are accepted and
    /// never answered, relayed ones stop passing bytes; neither is ever
    /// closed nor resumes, even once healed (as a SYN sent into a cut link
    /// waits for its retransmission, or a connection to a member that is
    /// gone waits for its timeout).
    BlackHole,
}

/// A relay to one address. Dropping it stops it and closes what it relays.
pub struct CuttableLink {
    /// Where to connect instead of the target.
    pub addr: SocketAddr,
    cut: Arc<watch::Sender<Mode>>,
    held: Arc<AtomicUsize>,
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
        let (cut, _) = watch::channel(Mode::Relay);
        let cut = Arc::new(cut);
        let target = Arc::new(Mutex::new(String::new()));
        let watcher = cut.clone();
        let to = target.clone();
        let held = Arc::new(AtomicUsize::new(0));
        let holding = held.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let target = to.lock().map(|t| t.clone()).unwrap_or_default();
                let mut rx = watcher.subscribe();
                let mode = *rx.borrow();
                if mode == Mode::BlackHole {
                    tokio::spawn(hold(inbound, None, rx, holding.clone()));
                    continue;
                }
                if mode == Mode::Refuse || target.is_empty() {
                    // Cut: the connection is refused (closed at once).
                    continue;
                }
                let holding = holding.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let cut = tokio::select! {
                        _ = copy_bidirectional(&mut inbound, &mut outbound) => return,
                        m = rx.wait_for(|m| *m != Mode::Relay) => m.map(|m| *m),
                    };
                    if matches!(cut, Ok(Mode::BlackHole)) {
                        hold(inbound, Some(outbound), rx, holding).await;
                    }
                });
            }
        });
        CuttableLink {
            addr,
            cut,
            held,
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
        self.cut.send_replace(Mode::Refuse);
    }

    /// Drops every packet from now on: nothing is closed, nothing answers
    /// (see `Mode::BlackHole`); [`CuttableLink::heal`] relays new
    /// connections again.
    pub fn black_hole(&self) {
        self.cut.send_replace(Mode::BlackHole);
    }

    /// How many connections the black hole holds (new ones it swallowed,
    /// relayed ones it stalled).
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Relays again.
    pub fn heal(&self) {
        self.cut.send_replace(Mode::Relay);
    }
}

/// Keeps a connection open and silent until the relay is dropped.
async fn hold(
    inbound: TcpStream,
    outbound: Option<TcpStream>,
    mut rx: watch::Receiver<Mode>,
    held: Arc<AtomicUsize>,
) {
    held.fetch_add(1, Ordering::Relaxed);
    while rx.changed().await.is_ok() {}
    held.fetch_sub(1, Ordering::Relaxed);
    drop((inbound, outbound));
}

impl Drop for CuttableLink {
    fn drop(&mut self) {
        self.cut.send_replace(Mode::Refuse);
        self.task.abort();
    }
}
