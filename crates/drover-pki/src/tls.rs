//! rustls configurations (TLS 1.3 only, ring provider).

use crate::Error;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::sync::Arc;

/// The one crypto provider: ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(what: &str) -> impl FnOnce(rustls::Error) -> Error + '_ {
    move |e| Error::Tls(format!("{what}: {e}"))
}

fn certs(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let v: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| Error::BadCertificate(format!("{what}: not PEM certificates ({e})")))?;
    if v.is_empty() {
        return Err(Error::BadCertificate(format!(
            "{what}: no certificate in it"
        )));
    }
    Ok(v)
}

fn key(pem: &str, what: &str) -> Result<PrivateKeyDer<'static>, Error> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| Error::BadCertificate(format!("{what}: not a PEM private key ({e})")))
}

/// A root store holding the cluster CA only.
pub fn roots(ca_pem: &str) -> Result<RootCertStore, Error> {
    let mut r = RootCertStore::empty();
    for c in certs(ca_pem, "the cluster CA")? {
        r.add(c).map_err(tls_err("the cluster CA"))?;
    }
    Ok(r)
}

/// What a server port speaks after the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// gRPC: HTTP/2 only.
    Grpc,
    /// The HTTP port: HTTP/2 or HTTP/1.1.
    Http,
}

/// A server's configuration: presents `[cert, CA]`, asks for a client
/// certificate signed by the CA but lets token holders in without one (the
/// services decide what each caller may do).
pub fn server_config(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
    alpn: Alpn,
) -> Result<Arc<ServerConfig>, Error> {
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca_pem)?), provider())
            .allow_unauthenticated()
            .build()
            .map_err(|e| Error::Tls(format!("the client verifier: {e}")))?;
    let mut chain = certs(cert_pem, "the server certificate")?;
    chain.extend(certs(ca_pem, "the cluster CA")?);
    let mut c = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err("TLS 1.3"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key(key_pem, "the server key")?)
        .map_err(tls_err("the server certificate"))?;
    c.alpn_protocols = match alpn {
        Alpn::Grpc => vec![b"h2".to_vec()],
        Alpn::Http => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    Ok(Arc::new(c))
}

/// A client's configuration: trusts the cluster CA only; presents
/// `identity` (certificate, key) when given.
pub fn client_config(
    ca_pem: &str,
    identity: Option<(&str, &str)>,
) -> Result<Arc<ClientConfig>, Error> {
    let b = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err("TLS 1.3"))?
        .with_root_certificates(roots(ca_pem)?);
    let mut c = match identity {
        Some((cert, k)) => b
            .with_client_auth_cert(
                certs(cert, "the client certificate")?,
                key(k, "the client key")?,
            )
            .map_err(tls_err("the client certificate"))?,
        None => b.with_no_client_auth(),
    };
    c.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(c))
}

/// A client certificate and key that can be replaced while the
/// configuration that presents them is in use: a member renews its own
/// certificate without a restart, and every connection made after
/// [`ClientIdentity::set`] presents the new one (connections already open
/// keep the one they were made with).
#[derive(Debug)]
pub struct ClientIdentity(std::sync::RwLock<Arc<CertifiedKey>>);

impl ClientIdentity {
    /// The identity `cert_pem` (the leaf first) with its key `key_pem`.
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<Arc<ClientIdentity>, Error> {
        Ok(Arc::new(ClientIdentity(std::sync::RwLock::new(certified(
            cert_pem, key_pem,
        )?))))
    }

    /// Presents `cert_pem` and `key_pem` from now on; an unreadable pair
    /// changes nothing.
    pub fn set(&self, cert_pem: &str, key_pem: &str) -> Result<(), Error> {
        let k = certified(cert_pem, key_pem)?;
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = k;
        Ok(())
    }

    fn get(&self) -> Arc<CertifiedKey> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ResolvesClientCert for ClientIdentity {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

fn certified(cert_pem: &str, key_pem: &str) -> Result<Arc<CertifiedKey>, Error> {
    let k = CertifiedKey::from_der(
        certs(cert_pem, "the client certificate")?,
        key(key_pem, "the client key")?,
        &provider(),
    )
    .map_err(tls_err("the client certificate"))?;
    Ok(Arc::new(k))
}

/// [`client_config`] presenting a [`ClientIdentity`], which may be renewed
/// while the configuration is in use.
pub fn client_config_renewable(
    ca_pem: &str,
    identity: Arc<ClientIdentity>,
) -> Result<Arc<ClientConfig>, Error> {
    let mut c = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err("TLS 1.3"))?
        .with_root_certificates(roots(ca_pem)?)
        .with_client_cert_resolver(identity);
    c.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(c))
}

/// A client configuration for HTTPS (HTTP/1.1) to the HTTP port, trusting
/// the cluster CA only.
pub fn https_client_config(ca_pem: &str) -> Result<Arc<ClientConfig>, Error> {
    let mut c = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err("TLS 1.3"))?
        .with_root_certificates(roots(ca_pem)?)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

/// A client configuration for joining: trusts whatever CA the server
/// presents in its chain if and only if its SHA-256 is `ca_digest`, and
/// then checks the server's certificate against it.
pub fn pinned_client_config(ca_digest: &str) -> Result<Arc<ClientConfig>, Error> {
    let provider = provider();
    let mut c = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_err("TLS 1.3"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedCa {
            digest: ca_digest.to_ascii_lowercase(),
            provider,
        }))
        .with_no_client_auth();
    c.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(c))
}

/// A joiner's refusal of a server whose CA is not the one its token pins.
#[derive(Debug)]
pub struct CaMismatch {
    /// The digest the token carries.
    pub digest: String,
}

impl std::fmt::Display for CaMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server does not present the CA whose SHA-256 the token carries ({}…): a wrong token, or not the cluster's server",
            &self.digest[..12.min(self.digest.len())]
        )
    }
}

impl std::error::Error for CaMismatch {}

/// Whether `e` (or an error it wraps) is a [`CaMismatch`]: the server is
/// not the one the token was made for, which retrying will not change.
pub fn is_ca_mismatch(e: &(dyn std::error::Error + 'static)) -> bool {
    ca_mismatch(e).is_some()
}

/// The [`CaMismatch`] in `e`, said for people.
pub fn ca_mismatch(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(m) = err.downcast_ref::<CaMismatch>() {
            return Some(m.to_string());
        }
        if let Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o))) =
            err.downcast_ref::<rustls::Error>()
        {
            if let Some(m) = o.0.downcast_ref::<CaMismatch>() {
                return Some(m.to_string());
            }
        }
        // io::Error hides what it wraps from source(): look inside.
        if let Some(found) = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| ca_mismatch(inner))
        {
            return Some(found);
        }
        cur = err.source();
    }
    None
}

#[derive(Debug)]
struct PinnedCa {
    digest: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(ca) = intermediates
            .iter()
            .find(|c| crate::sha256_hex(c.as_ref()) == self.digest)
        else {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Other(rustls::OtherError(Arc::new(CaMismatch {
                    digest: self.digest.clone(),
                }))),
            ));
        };
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone().into_owned())?;
        let v = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
            .build()
            .map_err(|e| rustls::Error::General(format!("the pinned CA: {e}")))?;
        v.verify_server_cert(end_entity, &[], server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
