//! drover's trust: the cluster CA, the certificates of members, nodes and
//! people, the join tokens that pin the CA, and the TLS 1.3 of every
//! connection (rustls with the ring provider).
//!
//! - [`ca`]: the cluster CA, made at bootstrap; it signs every certificate.
//! - [`cert`]: who a certificate names ([`Role`]), reading a peer's
//!   certificate ([`PeerCert`]), a fresh key with its signing request
//!   ([`Credential`]).
//! - [`token`]: join tokens `drover-server-<ca sha256>-<secret>` and
//!   `drover-node-…`, so a joining machine checks the CA before it sends its
//!   secret (as Swarm's `SWMTKN-1-<digest>-<secret>`).
//! - [`tls`]: rustls configurations: servers present `[leaf, CA]` and ask
//!   for an optional client certificate; clients trust only the cluster CA
//!   and the name [`SERVER_NAME`], or, while joining, only a CA whose digest
//!   the token carries.
//! - [`net`]: a tonic channel over TLS ([`net::channel`]) and a TLS listener
//!   ([`net::TlsIncoming`]) whose connections carry the peer's certificate.
//!
//! This crate does I/O only in [`net`] (sockets) and in the file helpers of
//! [`ca`] and [`cert`] (0600 files).

pub mod ca;
pub mod cert;
pub mod net;
pub mod revoke;
pub mod tls;
pub mod token;

pub use ca::Ca;
pub use cert::{Credential, PeerCert, Role};
pub use token::{JoinToken, TokenKind};

/// The DNS name every member certificate carries and every client checks:
/// a node's or a person's certificate never has it, so none of them can
/// pose as a server, whatever address a client dialled.
pub const SERVER_NAME: &str = "drover-server";

/// What can go wrong with certificates, keys and tokens.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Rcgen {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("{0}")]
    Tls(String),
    #[error("{0}")]
    BadToken(String),
    #[error("{0}")]
    BadCertificate(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn rcgen_err(what: impl Into<String>) -> impl FnOnce(rcgen::Error) -> Error {
    let what = what.into();
    move |source| Error::Rcgen { what, source }
}

/// SHA-256, lower-case hex.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, data).as_ref())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Writes a file readable by its owner only, atomically (temp + rename).
pub fn write_private(path: &std::path::Path, data: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let io = |what: &'static str, p: &std::path::Path| {
        let path = p.display().to_string();
        move |source| Error::Io { what, path, source }
    };
    // Beside the file, named after all of it: `node.key` and `node.crt`
    // never share one temporary file (`with_extension` would give both
    // `node.tmp`), nor do two processes (the pid).
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp).map_err(io("cannot write", &tmp))?;
        f.write_all(data).map_err(io("cannot write", &tmp))?;
        f.sync_all().map_err(io("cannot write", &tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(io("cannot write", path))
}

/// Reads a file, `None` when it does not exist.
pub fn read_optional(path: &std::path::Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            what: "cannot read",
            path: path.display().to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `node.key` and `node.crt` written at the same time each end whole:
    /// their temporary files are their own (both were once `node.tmp`, and
    /// one write could rename the other's content, or fail to find its
    /// own).
    #[test]
    fn two_files_of_one_stem_written_at_once_each_end_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (key, crt) = (dir.path().join("node.key"), dir.path().join("node.crt"));
        for round in 0..50 {
            let k = format!("key {round}").repeat(200);
            let c = format!("crt {round}").repeat(200);
            std::thread::scope(|s| {
                let a = s.spawn(|| write_private(&key, k.as_bytes()));
                let b = s.spawn(|| write_private(&crt, c.as_bytes()));
                a.join().unwrap().unwrap();
                b.join().unwrap().unwrap();
            });
            assert_eq!(std::fs::read_to_string(&key).unwrap(), k);
            assert_eq!(std::fs::read_to_string(&crt).unwrap(), c);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "no temporary file is left: {left:?}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&crt).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
