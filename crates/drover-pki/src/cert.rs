//! Who a certificate names, and the files a holder keeps.
//!
//! A certificate's subject common name says its role: `drover:member:<id>`
//! (a control-plane member, id in hex), `drover:node:<name>` (one node),
//! `drover:admin:<name>` or `drover:viewer:<name>` (a person or a CI job).
//! The CA writes the name; a signing request only brings its public key.

use crate::{rcgen_err, Error};
use rcgen::{CertificateParams, DnType, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Who a certificate speaks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// A control-plane member (its raft id).
    Member(u64),
    /// One node, by name.
    Node(String),
    /// A person or a job that may do everything.
    Admin(String),
    /// A person or a job that may read, watch and read logs.
    Viewer(String),
    /// A scraper that may read `/metrics` and `/status`, nothing else.
    Metrics(String),
}

impl Role {
    pub fn common_name(&self) -> String {
        match self {
            Role::Member(id) => format!("drover:member:{id:016x}"),
            Role::Node(n) => format!("drover:node:{n}"),
            Role::Admin(n) => format!("drover:admin:{n}"),
            Role::Viewer(n) => format!("drover:viewer:{n}"),
            Role::Metrics(n) => format!("drover:metrics:{n}"),
        }
    }

    pub fn from_common_name(cn: &str) -> Option<Role> {
        let rest = cn.strip_prefix("drover:")?;
        let (kind, name) = rest.split_once(':')?;
        if name.is_empty() {
            return None;
        }
        match kind {
            "member" => u64::from_str_radix(name, 16).ok().map(Role::Member),
            "node" => Some(Role::Node(name.to_string())),
            "admin" => Some(Role::Admin(name.to_string())),
            "viewer" => Some(Role::Viewer(name.to_string())),
            "metrics" => Some(Role::Metrics(name.to_string())),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Member(id) => write!(f, "member {id:016x}"),
            Role::Node(n) => write!(f, "node {n}"),
            Role::Admin(n) => write!(f, "admin {n}"),
            Role::Viewer(n) => write!(f, "viewer {n}"),
            Role::Metrics(n) => write!(f, "metrics reader {n}"),
        }
    }
}

/// A certificate the CA signed.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    /// The serial number, hex.
    pub serial: String,
    pub not_after: SystemTime,
    /// SHA-256 (hex) of the certified public key: what a node's name is
    /// bound to, so that only the key that first took a name renews or
    /// rejoins it.
    pub key: String,
}

/// What a verified peer certificate says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCert {
    pub role: Role,
    /// The serial number, hex (what revocation and node records name).
    pub serial: String,
    pub not_after: SystemTime,
    /// SHA-256 (hex) of the certified public key, as [`Issued::key`]: the
    /// key that owns a node's name, whichever certificate it presents.
    pub key: String,
}

impl PeerCert {
    /// Reads a certificate (DER) that TLS already verified against the CA.
    pub fn parse(der: &[u8]) -> Result<PeerCert, Error> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| Error::BadCertificate(format!("unreadable certificate: {e}")))?;
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|a| a.as_str().ok())
            .ok_or_else(|| Error::BadCertificate("the certificate has no common name".into()))?;
        let role = Role::from_common_name(cn).ok_or_else(|| {
            Error::BadCertificate(format!(
                "{cn:?} is not a drover role (drover:member|node|admin|viewer:NAME)"
            ))
        })?;
        let secs = cert.validity().not_after.timestamp().max(0) as u64;
        Ok(PeerCert {
            role,
            serial: crate::hex(cert.raw_serial()),
            not_after: SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
            key: crate::sha256_hex(&cert.public_key().subject_public_key.data),
        })
    }
}

/// The first certificate of a PEM text, as DER.
pub fn pem_to_der(pem: &str) -> Result<Vec<u8>, Error> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map(|c| c.to_vec())
        .map_err(|e| Error::BadCertificate(format!("not a PEM certificate: {e}")))
}

/// A key of one's own, its signing request, and (once signed) its
/// certificate: what an agent or a member keeps.
#[derive(Clone)]
pub struct Credential {
    pub key_pem: String,
    pub csr_pem: String,
    /// Empty until the CA signed.
    pub cert_pem: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential").finish_non_exhaustive()
    }
}

impl Credential {
    /// A new ECDSA P-256 key and a signing request naming `cn` (the CA
    /// ignores the name; it is there for people reading the request).
    pub fn generate(cn: &str) -> Result<Credential, Error> {
        let key = KeyPair::generate().map_err(rcgen_err("cannot make a key"))?;
        Credential::for_key(key, cn)
    }

    fn for_key(key: KeyPair, cn: &str) -> Result<Credential, Error> {
        let mut p = CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, cn);
        let csr = p
            .serialize_request(&key)
            .map_err(rcgen_err("cannot make a signing request"))?;
        Ok(Credential {
            key_pem: key.serialize_pem(),
            csr_pem: csr
                .pem()
                .map_err(rcgen_err("cannot encode a signing request"))?,
            cert_pem: String::new(),
        })
    }

    /// A new signing request for the same key (renewal keeps the key).
    pub fn renew_request(&self, cn: &str) -> Result<Credential, Error> {
        let key = KeyPair::from_pem(&self.key_pem).map_err(rcgen_err("the key is unreadable"))?;
        let mut c = Credential::for_key(key, cn)?;
        c.cert_pem = self.cert_pem.clone();
        Ok(c)
    }

    /// What the certificate says.
    pub fn peer(&self) -> Result<PeerCert, Error> {
        PeerCert::parse(&pem_to_der(&self.cert_pem)?)
    }

    /// Reads `DIR/NAME.crt` and `DIR/NAME.key`; `None` when either is absent.
    pub fn load(dir: &Path, name: &str) -> Result<Option<Credential>, Error> {
        let cert = crate::read_optional(&dir.join(format!("{name}.crt")))?;
        let key = crate::read_optional(&dir.join(format!("{name}.key")))?;
        Ok(match (cert, key) {
            (Some(cert_pem), Some(key_pem)) => Some(Credential {
                key_pem,
                csr_pem: String::new(),
                cert_pem,
            }),
            _ => None,
        })
    }

    /// Writes `DIR/NAME.crt` and `DIR/NAME.key` (0600).
    pub fn save(&self, dir: &Path, name: &str) -> Result<(), Error> {
        crate::write_private(&dir.join(format!("{name}.key")), self.key_pem.as_bytes())?;
        crate::write_private(&dir.join(format!("{name}.crt")), self.cert_pem.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_through_their_common_name() {
        for r in [
            Role::Member(0xabc),
            Role::Node("edge-1".into()),
            Role::Admin("ops".into()),
            Role::Viewer("ci".into()),
            Role::Metrics("prometheus".into()),
        ] {
            assert_eq!(Role::from_common_name(&r.common_name()), Some(r));
        }
        for bad in [
            "",
            "drover:",
            "drover:node:",
            "node:x",
            "drover:root:x",
            "drover:member:zz",
        ] {
            assert_eq!(Role::from_common_name(bad), None, "{bad}");
        }
    }
}
