//! The cluster CA: an ECDSA P-256 key and a self-signed certificate made at
//! bootstrap. Its key lives on the servers only (`DATA_DIR/ca.key`, 0600);
//! a joining member receives it over its pinned TLS connection.

use crate::cert::{Issued, Role};
use crate::{rcgen_err, Error};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
    SerialNumber,
};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The CA lives this long.
pub const CA_TTL: Duration = Duration::from_secs(10 * 365 * 86_400);

/// Certificates are valid from this long before they are made (clocks
/// differ between machines).
const BACKDATE: Duration = Duration::from_secs(300);

/// The cluster CA.
pub struct Ca {
    cert_pem: String,
    key_pem: String,
    digest: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").field("digest", &self.digest).finish()
    }
}

fn to_offset(t: SystemTime) -> time::OffsetDateTime {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    time::OffsetDateTime::from_unix_timestamp(secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

fn random_serial() -> SerialNumber {
    let mut b: [u8; 16] = rand::random();
    b[0] &= 0x7f; // positive
    b[0] |= 0x01; // and never a shorter encoding
    SerialNumber::from_slice(&b)
}

impl Ca {
    /// A new CA named after `cluster` (shown by `openssl x509 -text`).
    pub fn create(cluster: &str, now: SystemTime) -> Result<Ca, Error> {
        let key = KeyPair::generate().map_err(rcgen_err("cannot make the CA key"))?;
        let mut p = CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(DnType::CommonName, format!("drover cluster CA {cluster}"));
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        p.not_before = to_offset(now - BACKDATE);
        p.not_after = to_offset(now + CA_TTL);
        p.serial_number = Some(random_serial());
        let cert = p
            .self_signed(&key)
            .map_err(rcgen_err("cannot make the CA certificate"))?;
        Ca::from_pem(&cert.pem(), &key.serialize_pem())
    }

    /// The CA from its certificate and key (PEM).
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, Error> {
        let key = KeyPair::from_pem(key_pem).map_err(rcgen_err("the CA key is unreadable"))?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)
            .map_err(rcgen_err("the CA certificate is unreadable"))?;
        let der = crate::cert::pem_to_der(cert_pem)?;
        Ok(Ca {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            digest: crate::sha256_hex(&der),
            issuer,
        })
    }

    /// Reads `DIR/ca.crt` and `DIR/ca.key`, `None` when absent.
    pub fn load(dir: &Path) -> Result<Option<Ca>, Error> {
        let cert = crate::read_optional(&dir.join("ca.crt"))?;
        let key = crate::read_optional(&dir.join("ca.key"))?;
        match (cert, key) {
            (Some(c), Some(k)) => Ok(Some(Ca::from_pem(&c, &k)?)),
            (None, None) => Ok(None),
            _ => Err(Error::BadCertificate(format!(
                "{} holds only one of ca.crt and ca.key; restore both from a backup or from another member",
                dir.display()
            ))),
        }
    }

    /// Writes `DIR/ca.crt` and `DIR/ca.key` (both 0600).
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        crate::write_private(&dir.join("ca.crt"), self.cert_pem.as_bytes())?;
        crate::write_private(&dir.join("ca.key"), self.key_pem.as_bytes())
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// SHA-256 of the CA certificate (DER), hex: what tokens pin.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Signs a certificate for `role` over the public key of a CSR. Only the
    /// key is taken from the request: the name, the uses and the validity
    /// are the CA's choice.
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        role: &Role,
        sans: &[String],
        ttl: Duration,
        now: SystemTime,
    ) -> Result<Issued, Error> {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem).map_err(|e| {
            Error::BadCertificate(format!(
                "the certificate signing request is not valid ({e}); the agent makes it itself, upgrade it or remove its data dir's node.key"
            ))
        })?;
        self.sign(&csr.public_key, role, sans, ttl, now)
    }

    /// Makes a key and a certificate for `role` in one go (for the CA's own
    /// servers and for `drover access issue`).
    pub fn issue(
        &self,
        role: &Role,
        sans: &[String],
        ttl: Duration,
        now: SystemTime,
    ) -> Result<(Issued, String), Error> {
        let key = KeyPair::generate().map_err(rcgen_err("cannot make a key"))?;
        let issued = self.sign(&key, role, sans, ttl, now)?;
        Ok((issued, key.serialize_pem()))
    }

    fn sign(
        &self,
        public: &impl PublicKeyData,
        role: &Role,
        sans: &[String],
        ttl: Duration,
        now: SystemTime,
    ) -> Result<Issued, Error> {
        let mut p = CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(DnType::CommonName, role.common_name());
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if matches!(role, Role::Member(_)) {
            p.extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
            let mut names = vec![crate::SERVER_NAME.to_string()];
            names.extend(sans.iter().cloned());
            for n in names {
                let san = match n.parse::<std::net::IpAddr>() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => match n.clone().try_into() {
                        Ok(d) => SanType::DnsName(d),
                        Err(_) => continue,
                    },
                };
                if !p.subject_alt_names.contains(&san) {
                    p.subject_alt_names.push(san);
                }
            }
        }
        p.use_authority_key_identifier_extension = true;
        p.not_before = to_offset(now - BACKDATE);
        p.not_after = to_offset(now + ttl);
        let serial = random_serial();
        p.serial_number = Some(serial.clone());
        let cert = p
            .signed_by(public, &self.issuer)
            .map_err(rcgen_err(format!("cannot sign a certificate for {role}")))?;
        Ok(Issued {
            cert_pem: cert.pem(),
            serial: crate::hex(&serial.to_bytes()),
            not_after: now + ttl,
            key: crate::sha256_hex(public.der_bytes()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cert::{Credential, PeerCert};

    #[test]
    fn the_key_digest_follows_the_key_not_the_request() {
        let now = SystemTime::now();
        let ca = Ca::create("test", now).unwrap();
        let role = Role::Node("edge-1".into());
        let ttl = Duration::from_secs(3600);
        let cred = Credential::generate("a").unwrap();
        let first = ca.sign_csr(&cred.csr_pem, &role, &[], ttl, now).unwrap();
        let again = cred.renew_request("b").unwrap();
        let second = ca.sign_csr(&again.csr_pem, &role, &[], ttl, now).unwrap();
        assert_eq!(first.key.len(), 64);
        assert_eq!(first.key, second.key, "a new request for the same key");
        assert_ne!(first.serial, second.serial);
        let other = Credential::generate("a").unwrap();
        let third = ca.sign_csr(&other.csr_pem, &role, &[], ttl, now).unwrap();
        assert_ne!(first.key, third.key, "another key");
    }

    #[test]
    fn a_csr_gets_the_role_the_ca_chooses_and_round_trips() {
        let now = SystemTime::now();
        let ca = Ca::create("test", now).unwrap();
        assert_eq!(ca.digest().len(), 64);
        let cred = Credential::generate("drover:node:ignored-by-the-ca").unwrap();
        let role = Role::Node("edge-1".into());
        let issued = ca
            .sign_csr(&cred.csr_pem, &role, &[], Duration::from_secs(3600), now)
            .unwrap();
        let der = crate::cert::pem_to_der(&issued.cert_pem).unwrap();
        let peer = PeerCert::parse(&der).unwrap();
        assert_eq!(peer.role, role);
        assert_eq!(peer.serial, issued.serial);
        assert_eq!(peer.key, issued.key, "the key digest the CA recorded");
        // A CA read back from its files is the same CA.
        let d = tempfile::tempdir().unwrap();
        ca.save(d.path()).unwrap();
        let back = Ca::load(d.path()).unwrap().unwrap();
        assert_eq!(back.digest(), ca.digest());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let m = std::fs::metadata(d.path().join("ca.key")).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn garbage_csr_is_refused_with_a_reason() {
        let ca = Ca::create("t", SystemTime::now()).unwrap();
        let e = ca
            .sign_csr(
                "not a csr",
                &Role::Node("n".into()),
                &[],
                Duration::from_secs(1),
                SystemTime::now(),
            )
            .unwrap_err();
        assert!(matches!(e, Error::BadCertificate(_)));
    }
}
