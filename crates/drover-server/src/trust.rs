//! This member's part of the cluster PKI: the CA (every member holds it, so
//! any member can sign), its own member certificate, the TLS configurations
//! of its ports and of its calls to other members, and the join tokens.
//!
//! Files in the data dir (all 0600): `ca.crt`, `ca.key`, `member.crt`,
//! `member.key`. Tokens are in `server.json` and, for people, in
//! `server-token` / `node-token`; a rotated token is replicated under
//! [`TOKEN_KEY`] so every member accepts the new one and refuses the old.
//! It is replicated sealed ([`Trust::seal_token`]): AES-256-GCM under a key
//! derived from the CA key, beside the SHA-256 of the token, so a read of
//! the store (a leaked snapshot, a raw key read) gives nothing a caller
//! can join with unless it holds the CA key, which is all power anyway.
//! Members unseal it: they hand the tokens to the members that join and
//! write them in their data dirs for people.

use crate::error::ApiError;
use anyhow::{Context, Result};
use base64::Engine as _;
use drover_pki::cert::Issued;
use drover_pki::net::ServerTls;
use drover_pki::tls::{self, Alpn, ClientIdentity};
use drover_pki::{Ca, Credential, JoinToken, Role, TokenKind};
use ring::{aead, digest, hkdf};
use rustls::ClientConfig;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

/// Member certificates live this long unless `--member-cert-ttl` says
/// otherwise; a member renews its own (it holds the CA) while it runs, when
/// a third of that or less is left ([`Trust::renew_member_if_due`]).
pub const MEMBER_CERT_TTL: Duration = Duration::from_secs(365 * 86_400);

/// Node certificates live this long unless `--node-cert-ttl` says otherwise.
pub const NODE_CERT_TTL: Duration = Duration::from_secs(30 * 86_400);

/// Client certificates (`drover access issue`) unless `--ttl` says otherwise.
pub const CLIENT_CERT_TTL: Duration = Duration::from_secs(365 * 86_400);

/// Store key of a rotated token: `/drover/tokens/server`, `/drover/tokens/node`.
pub fn token_key(kind: TokenKind) -> String {
    format!("{TOKEN_KEY}{}", kind.as_str())
}

/// Store key of the rotated admin token (sealed: members write it in
/// their `client.yaml` and kubeconfig).
pub const ADMIN_TOKEN_KEY: &str = "/drover/tokens/admin";

/// Store key of the metrics token's SHA-256 (only checked, so never
/// kept itself).
pub const METRICS_TOKEN_KEY: &str = "/drover/tokens/metrics";

/// The prefix of replicated tokens.
pub const TOKEN_KEY: &str = "/drover/tokens/";

/// A replicated token as stored under [`token_key`]: the SHA-256 of the
/// token (hex), to see that it changed, and the token sealed with the
/// key [`Trust`] derives from the CA key (base64 of the nonce and the
/// AES-256-GCM ciphertext and tag; the kind is the associated data).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SealedToken {
    kind: String,
    sha256: String,
    sealed: String,
}

/// The SHA-256 of a token's text, hex.
pub fn token_digest(t: &JoinToken) -> String {
    sha256_hex(&t.to_string())
}

/// The SHA-256 of a text, hex.
pub fn sha256_hex(text: &str) -> String {
    let d = digest::digest(&digest::SHA256, text.as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// What a replicated token record holds, read by [`Trust::open_token`].
#[derive(Debug)]
pub enum Replicated {
    /// A sealed token, unsealed.
    Sealed(JoinToken),
    /// A token in clear, as members before sealing wrote it: taken up,
    /// and to be written again sealed.
    Clear(JoinToken),
}

/// The names a member certificate carries besides `drover-server`: the
/// hosts of its addresses (so `curl --cacert ca.crt https://HOST:PORT`
/// works too).
pub fn hosts_of(addrs: &[&str]) -> Vec<String> {
    let mut out = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    for a in addrs {
        let host = match a.rsplit_once(':') {
            Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
            None => a,
        };
        if !host.is_empty() && host != "0.0.0.0" && host != "::" && !out.iter().any(|h| h == host) {
            out.push(host.to_string());
        }
    }
    out
}

/// A new certificate for member `id` signed by `ca`, saved in `dir`
/// (`member.crt`, `member.key`).
fn issue_member(
    ca: &Ca,
    dir: &Path,
    id: u64,
    hosts: &[String],
    ttl: Duration,
    now: SystemTime,
) -> Result<Credential> {
    let (issued, key) = ca.issue(&Role::Member(id), hosts, ttl, now)?;
    let member = Credential {
        key_pem: key,
        csr_pem: String::new(),
        cert_pem: issued.cert_pem,
    };
    member.save(dir, "member")?;
    Ok(member)
}

/// This member's trust.
pub struct Trust {
    pub ca: Ca,
    /// The gRPC port's TLS (replaceable).
    pub grpc: Arc<ServerTls>,
    /// The HTTP port's TLS.
    pub http: Arc<ServerTls>,
    client: Arc<ClientConfig>,
    /// What [`Trust::client`] presents (replaced on renewal).
    identity: Arc<ClientIdentity>,
    member: RwLock<Credential>,
    tokens: RwLock<(JoinToken, JoinToken)>,
    /// How long node certificates live.
    pub node_cert_ttl: Duration,
    /// How long member certificates live (this member's renewals, and the
    /// certificates it signs for joining members).
    pub member_cert_ttl: Duration,
    /// Where and as whom this member renews its certificate; `None`: it
    /// does not (set by [`Trust::renew_as`]).
    renewal: Option<Renewal>,
    /// How many times the certificate was renewed ([`Trust::renewals`]).
    renewed: tokio::sync::watch::Sender<u64>,
}

/// What a member's certificate renewal needs besides the CA.
#[derive(Debug, Clone)]
struct Renewal {
    dir: PathBuf,
    id: u64,
    hosts: Vec<String>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust").field("ca", &self.ca).finish()
    }
}

impl Trust {
    /// A new cluster: a new CA, this member's certificate, new tokens (or
    /// the secrets given).
    pub fn bootstrap(
        dir: &Path,
        id: u64,
        hosts: &[String],
        server_secret: Option<&str>,
        node_secret: Option<&str>,
    ) -> Result<Trust> {
        let now = SystemTime::now();
        let ca = Ca::create(&format!("{id:016x}"), now).context("cannot make the cluster CA")?;
        ca.save(dir)?;
        let token = |kind, secret: Option<&str>| match secret {
            Some(s) => JoinToken {
                kind,
                ca_digest: ca.digest().to_string(),
                secret: s.to_string(),
            },
            None => JoinToken::generate(kind, ca.digest()),
        };
        let server = token(TokenKind::Server, server_secret);
        let node = token(TokenKind::Node, node_secret);
        let member = issue_member(&ca, dir, id, hosts, MEMBER_CERT_TTL, now)?;
        Trust::build(ca, member, server, node)
    }

    /// A cluster restored from a snapshot (`drover server --restore`): the
    /// snapshot's CA and tokens, so every node's and client's certificate
    /// stays valid, and a new certificate for this member.
    pub fn restore(
        dir: &Path,
        id: u64,
        hosts: &[String],
        h: &drover_proto::v1::BackupHeader,
    ) -> Result<Trust> {
        let ca = Ca::from_pem(&h.ca_cert, &h.ca_key)
            .context("the snapshot's CA does not read (ca_cert, ca_key)")?;
        let server = JoinToken::parse(&h.server_token, "the snapshot's server token")?;
        let node = JoinToken::parse(&h.node_token, "the snapshot's node token")?;
        ca.save(dir)?;
        let member = issue_member(&ca, dir, id, hosts, MEMBER_CERT_TTL, SystemTime::now())?;
        Trust::build(ca, member, server, node)
    }

    /// A member's trust from its data dir; `None` when it has none yet (a
    /// joining member before its certificate). A certificate due for
    /// renewal is renewed by [`Trust::renew_member_if_due`], which the
    /// server calls before it serves.
    pub fn load(
        dir: &Path,
        id: u64,
        hosts: &[String],
        server_token: &str,
        node_token: &str,
    ) -> Result<Option<Trust>> {
        let Some(ca) = Ca::load(dir)? else {
            return Ok(None);
        };
        let Some(mut member) = Credential::load(dir, "member")? else {
            return Ok(None);
        };
        let readable = member
            .peer()
            .with_context(|| format!("{} is unreadable", dir.join("member.crt").display()));
        if let Err(e) = readable {
            // The CA is there: a member whose own certificate is damaged
            // gets a new one rather than staying down.
            tracing::warn!("{e:#}: issuing this member a new certificate");
            member = issue_member(&ca, dir, id, hosts, MEMBER_CERT_TTL, SystemTime::now())?;
        }
        let server = JoinToken::parse(server_token, "server.json: server_token")?;
        let node = JoinToken::parse(node_token, "server.json: node_token")?;
        Ok(Some(Trust::build(ca, member, server, node)?))
    }

    /// A joining member's trust, from what the cluster certified.
    pub fn from_certified(
        dir: &Path,
        key_pem: String,
        resp: &drover_proto::v1::CertifyResponse,
    ) -> Result<Trust> {
        let ca =
            Ca::from_pem(&resp.ca, &resp.ca_key).context("the cluster sent an unreadable CA")?;
        ca.save(dir)?;
        let member = Credential {
            key_pem,
            csr_pem: String::new(),
            cert_pem: resp.cert.clone(),
        };
        member.save(dir, "member")?;
        let server = JoinToken::parse(&resp.server_token, "the cluster's server token")?;
        let node = JoinToken::parse(&resp.node_token, "the cluster's node token")?;
        Trust::build(ca, member, server, node)
    }

    fn build(ca: Ca, member: Credential, server: JoinToken, node: JoinToken) -> Result<Trust> {
        let grpc =
            tls::server_config(ca.cert_pem(), &member.cert_pem, &member.key_pem, Alpn::Grpc)?;
        let http =
            tls::server_config(ca.cert_pem(), &member.cert_pem, &member.key_pem, Alpn::Http)?;
        let identity = ClientIdentity::new(&member.cert_pem, &member.key_pem)?;
        let client = tls::client_config_renewable(ca.cert_pem(), identity.clone())?;
        Ok(Trust {
            ca,
            grpc: ServerTls::new(grpc),
            http: ServerTls::new(http),
            client,
            identity,
            member: RwLock::new(member),
            tokens: RwLock::new((server, node)),
            node_cert_ttl: NODE_CERT_TTL,
            member_cert_ttl: MEMBER_CERT_TTL,
            renewal: None,
            renewed: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Makes this member renew its own certificate (see
    /// [`Trust::renew_member_if_due`]) as member `id`, for `hosts`, saving
    /// it in `dir`.
    pub fn renew_as(&mut self, dir: &Path, id: u64, hosts: &[String]) {
        self.renewal = Some(Renewal {
            dir: dir.to_path_buf(),
            id,
            hosts: hosts.to_vec(),
        });
    }

    /// When this member's certificate is due for renewal: when a third of
    /// [`Trust::member_cert_ttl`] or less is left. A certificate that would
    /// outlive that lifetime (the lifetime was shortened), or that is not
    /// this member's, is due now.
    pub fn member_renewal_due(&self, now: SystemTime) -> SystemTime {
        if self.renewal.is_none() {
            // Never: this member does not renew.
            return now + Duration::from_secs(100 * 365 * 86_400);
        }
        let member = self.member.read().unwrap_or_else(|e| e.into_inner());
        let Ok(peer) = member.peer() else {
            return now;
        };
        let mine = self
            .renewal
            .as_ref()
            .is_some_and(|r| peer.role == Role::Member(r.id));
        let left = peer.not_after.duration_since(now).unwrap_or_default();
        // A minute of slack: a certificate issued just now by a clock a
        // little ahead is not "longer than the lifetime".
        if !mine || left > self.member_cert_ttl + Duration::from_secs(60) {
            return now;
        }
        peer.not_after
            .checked_sub(self.member_cert_ttl / 3)
            .unwrap_or(now)
    }

    /// Renews this member's certificate when it is due
    /// ([`Trust::member_renewal_due`]): a new key and certificate, saved in
    /// the data dir, then presented by both ports and to other members for
    /// every connection made from then on (open connections keep theirs,
    /// which stays valid: it was renewed with a third of its life left).
    /// Answers the new certificate's end of validity, or `None` when
    /// nothing was due (or this member does not renew).
    pub fn renew_member_if_due(&self) -> Result<Option<SystemTime>> {
        let Some(r) = &self.renewal else {
            return Ok(None);
        };
        let now = SystemTime::now();
        if self.member_renewal_due(now) > now {
            return Ok(None);
        }
        let member = issue_member(&self.ca, &r.dir, r.id, &r.hosts, self.member_cert_ttl, now)?;
        let peer = member.peer()?;
        let ca = self.ca.cert_pem();
        let grpc = tls::server_config(ca, &member.cert_pem, &member.key_pem, Alpn::Grpc)?;
        let http = tls::server_config(ca, &member.cert_pem, &member.key_pem, Alpn::Http)?;
        self.identity.set(&member.cert_pem, &member.key_pem)?;
        self.grpc.set(grpc);
        self.http.set(http);
        *self.member.write().unwrap_or_else(|e| e.into_inner()) = member;
        self.renewed.send_modify(|n| *n += 1);
        tracing::info!(
            serial = %peer.serial,
            "renewed this member's certificate: valid until {}",
            drover_controller::Timestamp::from(peer.not_after).to_rfc3339()
        );
        Ok(Some(peer.not_after))
    }

    /// How this member dials other members (with its member certificate).
    pub fn client_tls(&self) -> Arc<ClientConfig> {
        self.client.clone()
    }

    /// Counts this member's renewals: connections to other members made
    /// before one keep presenting the old certificate, which other members
    /// refuse once it expires, so whoever keeps channels to other members
    /// makes new ones when this changes.
    pub fn renewals(&self) -> tokio::sync::watch::Receiver<u64> {
        self.renewed.subscribe()
    }

    /// How many times this member's certificate was renewed so far (see
    /// [`Trust::renewals`]).
    pub fn renewal_count(&self) -> u64 {
        *self.renewed.borrow()
    }

    /// This member's certificate (PEM).
    pub fn member_cert(&self) -> String {
        self.member
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .cert_pem
            .clone()
    }

    /// The token of `kind` this member knows of (a rotated one replaces it,
    /// see [`Trust::set_token`]).
    pub fn token(&self, kind: TokenKind) -> JoinToken {
        let t = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        match kind {
            TokenKind::Server => t.0.clone(),
            TokenKind::Node => t.1.clone(),
        }
    }

    pub fn set_token(&self, t: JoinToken) {
        let mut g = self.tokens.write().unwrap_or_else(|e| e.into_inner());
        match t.kind {
            TokenKind::Server => g.0 = t,
            TokenKind::Node => g.1 = t,
        }
    }

    /// Checks a join token given by a caller against the current one.
    pub fn check_token(&self, given: &str, kind: TokenKind) -> Result<(), ApiError> {
        let wanted = self.token(kind);
        let bad = || {
            ApiError::Forbidden(format!(
                "wrong {} token: use the content of {}-token in a server's data dir",
                kind.as_str(),
                kind.as_str()
            ))
        };
        let given = JoinToken::parse(given, "token").map_err(|_| bad())?;
        if given.kind != kind {
            return Err(ApiError::Forbidden(format!(
                "a {} token cannot do this: use the {} token ({}-token in a server's data dir)",
                given.kind.as_str(),
                kind.as_str(),
                kind.as_str()
            )));
        }
        if wanted.secret_matches(&given) {
            Ok(())
        } else {
            Err(bad())
        }
    }

    /// The key replicated tokens are sealed with: HKDF-SHA256 of the CA's
    /// private key, which every member holds and no client ever reads.
    fn seal_key(&self) -> Result<aead::LessSafeKey, ApiError> {
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, b"drover replicated join tokens v1");
        let prk = salt.extract(self.ca.key_pem().as_bytes());
        let okm = prk
            .expand(&[b"aes-256-gcm"], &aead::AES_256_GCM)
            .map_err(|_| ApiError::Internal("cannot derive the token sealing key".into()))?;
        Ok(aead::LessSafeKey::new(aead::UnboundKey::from(okm)))
    }

    /// The key dashboard session cookies are signed with
    /// ([`crate::ui::session`]): HKDF-SHA256 of the CA's private key under
    /// its own label, so that every member checks a cookie another member
    /// made and no client can forge one.
    pub fn session_key(&self) -> ring::hmac::Key {
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, b"drover dashboard sessions v1");
        let prk = salt.extract(self.ca.key_pem().as_bytes());
        match prk.expand(&[b"hmac-sha256"], ring::hmac::HMAC_SHA256) {
            Ok(okm) => ring::hmac::Key::from(okm),
            // Unreachable: 32 bytes is far below HKDF's 255 * 32 limit.
            Err(_) => ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.ca.key_pem().as_bytes()),
        }
    }

    /// `t` as it is replicated under [`token_key`] (sealed, with its
    /// SHA-256).
    pub fn seal_token(&self, t: &JoinToken) -> Result<Vec<u8>, ApiError> {
        self.seal_secret(t.kind.as_str(), &t.to_string())
    }

    /// A secret of `kind` (a join token's kind, or "admin") as it is
    /// replicated: sealed with the CA's key, beside its SHA-256.
    pub fn seal_secret(&self, kind: &str, text: &str) -> Result<Vec<u8>, ApiError> {
        let key = self.seal_key()?;
        let nonce: [u8; aead::NONCE_LEN] = rand::random();
        let mut buf = text.as_bytes().to_vec();
        key.seal_in_place_append_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(kind.as_bytes()),
            &mut buf,
        )
        .map_err(|_| ApiError::Internal("cannot seal the token".into()))?;
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&buf);
        let record = SealedToken {
            kind: kind.to_string(),
            sha256: sha256_hex(text),
            sealed: base64::engine::general_purpose::STANDARD.encode(sealed),
        };
        serde_json::to_vec(&record).map_err(|e| ApiError::Internal(format!("token record: {e}")))
    }

    /// The token of `kind` in a record [`Trust::seal_token`] wrote (or in
    /// clear, as older members wrote it). The error says what is wrong.
    pub fn open_token(&self, kind: TokenKind, value: &[u8]) -> Result<Replicated, String> {
        let Ok(record) = serde_json::from_slice::<SealedToken>(value) else {
            let text = std::str::from_utf8(value)
                .map_err(|_| "neither a sealed record nor a token".to_string())?;
            let t = JoinToken::parse(text, "the replicated token").map_err(|e| e.to_string())?;
            return Ok(Replicated::Clear(t));
        };
        let current = self.token(kind);
        match self.open_record(kind.as_str(), &record, &current.to_string())? {
            None => Ok(Replicated::Sealed(current)),
            Some(text) => {
                let t =
                    JoinToken::parse(&text, "the replicated token").map_err(|e| e.to_string())?;
                Ok(Replicated::Sealed(t))
            }
        }
    }

    /// The secret of `kind` in a record [`Trust::seal_secret`] wrote:
    /// `None` when it is `current` (already taken up).
    pub fn open_secret(
        &self,
        kind: &str,
        value: &[u8],
        current: &str,
    ) -> Result<Option<String>, String> {
        let record = serde_json::from_slice::<SealedToken>(value)
            .map_err(|e| format!("not a sealed token record: {e}"))?;
        self.open_record(kind, &record, current)
    }

    fn open_record(
        &self,
        kind: &str,
        record: &SealedToken,
        current: &str,
    ) -> Result<Option<String>, String> {
        if record.kind != kind {
            return Err(format!(
                "a {} token under the {kind} token's key",
                record.kind
            ));
        }
        // Already taken up: no need to unseal it again.
        if drover_pki::token::same(record.sha256.as_bytes(), sha256_hex(current).as_bytes()) {
            return Ok(None);
        }
        let sealed = base64::engine::general_purpose::STANDARD
            .decode(record.sealed.as_bytes())
            .map_err(|e| format!("sealed: not base64: {e}"))?;
        if sealed.len() < aead::NONCE_LEN + aead::AES_256_GCM.tag_len() {
            return Err("sealed: too short".into());
        }
        let (nonce, ciphertext) = sealed.split_at(aead::NONCE_LEN);
        let nonce = aead::Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| "sealed: bad nonce".to_string())?;
        let mut buf = ciphertext.to_vec();
        let key = self.seal_key().map_err(|e| e.to_string())?;
        let plain = key
            .open_in_place(nonce, aead::Aad::from(kind.as_bytes()), &mut buf)
            .map_err(|_| "sealed: does not open with this cluster's CA key".to_string())?;
        let text = std::str::from_utf8(plain).map_err(|_| "sealed: not text".to_string())?;
        if !drover_pki::token::same(record.sha256.as_bytes(), sha256_hex(text).as_bytes()) {
            return Err("sha256: does not match the sealed token".into());
        }
        Ok(Some(text.to_string()))
    }

    /// Signs a certificate for `role` over the key of `csr`.
    pub fn sign(
        &self,
        csr: &str,
        role: &Role,
        hosts: &[String],
        ttl: Duration,
    ) -> Result<Issued, ApiError> {
        self.ca
            .sign_csr(csr, role, hosts, ttl, SystemTime::now())
            .map_err(|e| ApiError::BadRequest(format!("csr: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replicated_token_is_sealed_and_opens_only_whole_with_the_cas_key() {
        let tmp = tempfile::tempdir().unwrap();
        let trust = Trust::bootstrap(tmp.path(), 1, &[], None, None).unwrap();
        let t = JoinToken::generate(TokenKind::Node, trust.ca.digest());
        let sealed = trust.seal_token(&t).unwrap();
        let text = String::from_utf8(sealed.clone()).unwrap();
        assert!(!text.contains(&t.secret), "{text}");
        assert!(text.contains(&token_digest(&t)), "{text}");
        match trust.open_token(TokenKind::Node, &sealed) {
            Ok(Replicated::Sealed(got)) => assert_eq!(got, t),
            other => panic!("{other:?}"),
        }
        // Under the other kind's key, or changed: refused.
        assert!(trust.open_token(TokenKind::Server, &sealed).is_err());
        let mut record: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
        let s = record["sealed"].as_str().unwrap().to_string();
        let flipped = if s.starts_with('A') {
            s.replacen('A', "B", 1)
        } else {
            format!("A{}", &s[1..])
        };
        record["sealed"] = flipped.into();
        let e = trust
            .open_token(TokenKind::Node, &serde_json::to_vec(&record).unwrap())
            .unwrap_err();
        assert!(e.starts_with("sealed"), "{e}");
        // Another cluster's CA cannot open it.
        std::fs::create_dir(tmp.path().join("o")).unwrap();
        let other = Trust::bootstrap(&tmp.path().join("o"), 1, &[], None, None).unwrap();
        assert!(other.open_token(TokenKind::Node, &sealed).is_err());
        // A token in clear (older members): taken, to be sealed again.
        match trust.open_token(TokenKind::Node, t.to_string().as_bytes()) {
            Ok(Replicated::Clear(got)) => assert_eq!(got, t),
            other => panic!("{other:?}"),
        }
    }
}
