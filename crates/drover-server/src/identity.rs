//! What a server keeps about itself in its data dir, and the files it writes
//! for people and clients.
//!
//! - `server.json` (0600): this member's id, addresses and tokens. A restart
//!   with the same data dir reads it and needs no other flag.
//! - `server-token` and `node-token` (0600): what another server or an
//!   agent passes to join (`drover-server-…`, `drover-node-…`: both pin the
//!   CA, see [`drover_pki::token`]).
//! - `ca.crt`, `ca.key`, `member.crt`, `member.key` (0600): the cluster CA
//!   and this member's certificate ([`crate::trust`]).
//! - `client.yaml` (0600): the servers, the CA and the admin token, in the
//!   format `drover --config` reads.

use anyhow::{bail, Context, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The content of `DIR/server.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Identity {
    /// This member's raft id, in hex.
    #[serde(with = "hex_id")]
    pub id: u64,
    /// The gRPC address peers and clients reach this member at.
    pub addr: String,
    /// The HTTP address (health, status).
    pub http: String,
    /// The server join token (`drover-server-…`) this member knows (empty
    /// in a data dir made before TLS).
    #[serde(default)]
    pub server_token: String,
    /// The node join token (`drover-node-…`) this member knows.
    #[serde(default)]
    pub node_token: String,
    /// Empty until the join completed.
    #[serde(default)]
    pub admin_token: String,
    /// Where to join, while the join has not completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<String>,
}

mod hex_id {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{id:016x}"))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        u64::from_str_radix(&s, 16).map_err(serde::de::Error::custom)
    }
}

/// The client configuration file format (`client.yaml`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientFile {
    pub servers: Vec<String>,
    /// The admin token; empty when a certificate identifies the client.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// The cluster CA (PEM): the only issuer the client trusts.
    pub ca: String,
    /// A client certificate and its key (PEM), from `drover access issue`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cert: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
}

impl Identity {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("server.json")
    }

    /// Reads `DIR/server.json`, or `None` for a fresh data dir.
    pub fn load(dir: &Path) -> Result<Option<Identity>> {
        let p = Self::path(dir);
        match std::fs::read(&p) {
            Ok(b) => Ok(Some(serde_json::from_slice(&b).with_context(|| {
                format!(
                    "{} is corrupt; it holds this member's identity",
                    p.display()
                )
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
        }
    }

    pub fn save(&self, dir: &Path) -> Result<()> {
        write_private(&Self::path(dir), &serde_json::to_vec_pretty(self)?)
    }
}

/// A new random member id (never 0).
pub fn new_id() -> u64 {
    loop {
        let id: u64 = rand::rng().random();
        if id != 0 {
            return id;
        }
    }
}

/// A new random token: 32 hex digits of a CSPRNG after a readable prefix.
pub fn new_token(kind: &str) -> String {
    let bytes: [u8; 16] = rand::rng().random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("drover-{kind}-{hex}")
}

/// Checks a user-given token before it is stored.
pub fn check_token(t: &str, flag: &str) -> Result<()> {
    if t.len() < 8 {
        bail!("{flag}: a token must have at least 8 characters");
    }
    if !t.chars().all(|c| c.is_ascii_graphic()) {
        bail!("{flag}: a token may only hold printable ASCII without spaces");
    }
    Ok(())
}

/// Writes a file readable by its owner only, atomically (temp + rename).
pub fn write_private(path: &Path, data: &[u8]) -> Result<()> {
    drover_pki::write_private(path, data)?;
    Ok(())
}

/// Writes `DIR/server-token`, `DIR/node-token` and `DIR/client.yaml`.
pub fn write_client_files(dir: &Path, id: &Identity, ca: &str, servers: &[String]) -> Result<()> {
    write_private(
        &dir.join("server-token"),
        format!("{}\n", id.server_token).as_bytes(),
    )?;
    write_private(
        &dir.join("node-token"),
        format!("{}\n", id.node_token).as_bytes(),
    )?;
    let file = ClientFile {
        servers: servers.to_vec(),
        token: id.admin_token.clone(),
        ca: ca.to_string(),
        cert: String::new(),
        key: String::new(),
    };
    let yaml = serde_saphyr::to_string(&file).context("cannot encode client.yaml")?;
    let text = format!(
        "# drover client configuration, written by `drover server` (member {:016x}).\n# Use it with `drover --config {}` or DROVER_CONFIG.\n{yaml}",
        id.id,
        dir.join("client.yaml").display()
    );
    write_private(&dir.join("client.yaml"), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_round_trip_and_private_mode() {
        let d = tempfile::tempdir().unwrap();
        assert!(Identity::load(d.path()).unwrap().is_none());
        let id = Identity {
            id: 0xabc,
            addr: "127.0.0.1:1".into(),
            http: "127.0.0.1:2".into(),
            server_token: "drover-server-x".into(),
            node_token: "drover-node-x".into(),
            admin_token: new_token("admin"),
            join: None,
        };
        id.save(d.path()).unwrap();
        assert_eq!(Identity::load(d.path()).unwrap(), Some(id.clone()));
        write_client_files(d.path(), &id, "CA", &["127.0.0.1:1".into()]).unwrap();
        let text = std::fs::read_to_string(d.path().join("client.yaml")).unwrap();
        let parsed: ClientFile = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(parsed.token, id.admin_token);
        assert_eq!(parsed.ca, "CA");
        assert_eq!(parsed.servers, vec!["127.0.0.1:1".to_string()]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for f in ["client.yaml", "server-token", "node-token", "server.json"] {
                let mode = std::fs::metadata(d.path().join(f))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o777, 0o600, "{f}");
            }
        }
    }

    #[test]
    fn tokens_are_random_and_checked() {
        assert_ne!(new_token("join"), new_token("join"));
        assert!(check_token("short", "--token").is_err());
        assert!(check_token("has space in it", "--token").is_err());
        assert!(check_token("long-enough-token", "--token").is_ok());
    }
}
