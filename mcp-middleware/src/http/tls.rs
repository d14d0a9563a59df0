//! [`TlsOptions`]: HTTPS for the HTTP front (rustls, with the `ring` provider), optionally with
//! client certificates (mTLS) whose subject becomes the session's [`Identity`].

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use crate::auth::CertificateInfo;
use crate::auth::Identity;

/// Whether the TLS handshake demands a client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientCertificates {
    /// A client without a certificate issued by the CA cannot connect.
    Required,
    /// A client may connect without one (and then authenticate with a bearer credential); one
    /// it presents must be issued by the CA.
    Optional,
}

/// TLS settings of the HTTP front: the server's certificate chain and key, and optionally the
/// CA whose client certificates identify clients (mTLS).
///
/// The configuration is built and checked when the options are made, so a bad certificate,
/// key or CA is an error here ([`TlsError`], naming the file), not when serving starts. The
/// front then speaks HTTP/1.1 over TLS 1.2 or 1.3 (ALPN `http/1.1`).
///
/// ```no_run
/// use mcp_middleware::http::{ClientCertificates, HttpOptions, TlsOptions};
///
/// # fn main() -> Result<(), mcp_middleware::http::TlsError> {
/// let tls = TlsOptions::from_pem_files("server.pem", "server.key")?
///     .client_certificates_file("clients-ca.pem", ClientCertificates::Required)?;
/// let options = HttpOptions::default().tls(tls);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct TlsOptions {
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    clients: Option<(Arc<RootCertStore>, ClientCertificates)>,
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("certificates", &self.chain.len())
            .field(
                "client_certificates",
                &self
                    .clients
                    .as_ref()
                    .map(|(roots, mode)| (roots.len(), *mode)),
            )
            .finish_non_exhaustive()
    }
}

/// A TLS setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} `{}`: {cause}", path.display())]
    Read {
        /// What the file was for.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The PEM holds nothing usable, or rustls refused it.
    #[error("{0}")]
    Invalid(String),
}

impl TlsOptions {
    /// From PEM: the server's certificate chain (its own certificate first) and its private
    /// key (PKCS#8, PKCS#1 RSA or SEC1 EC).
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<Self, TlsError> {
        let chain = certificates(chain, "the server certificate")?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|err| {
            TlsError::Invalid(format!("the server key holds no usable private key: {err}"))
        })?;
        Self::build(chain, Arc::new(key), None)
    }

    /// [`from_pem`](Self::from_pem) on the contents of two files.
    pub fn from_pem_files(
        chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self, TlsError> {
        let (chain_path, key_path) = (chain.as_ref(), key.as_ref());
        let chain = read("the server certificate", chain_path)?;
        let key = read("the server key", key_path)?;
        Self::from_pem(&chain, &key).map_err(|err| in_file(err, chain_path, key_path))
    }

    /// Asks clients for certificates issued by the CA certificates in `ca` (PEM); a client's
    /// certificate subject becomes its [`Identity::Certificate`].
    pub fn client_certificates(
        self,
        ca: &[u8],
        mode: ClientCertificates,
    ) -> Result<Self, TlsError> {
        let mut roots = RootCertStore::empty();
        for cert in certificates(ca, "the client CA")? {
            roots.add(cert).map_err(|err| {
                TlsError::Invalid(format!(
                    "the client CA holds an unusable certificate: {err}"
                ))
            })?;
        }
        Self::build(self.chain, self.key, Some((Arc::new(roots), mode)))
    }

    /// [`client_certificates`](Self::client_certificates) with the CA read from `path`.
    pub fn client_certificates_file(
        self,
        path: impl AsRef<Path>,
        mode: ClientCertificates,
    ) -> Result<Self, TlsError> {
        let path = path.as_ref();
        let ca = read("the client CA", path)?;
        self.client_certificates(&ca, mode)
            .map_err(|err| match err {
                TlsError::Invalid(message) => {
                    TlsError::Invalid(format!("`{}`: {message}", path.display()))
                }
                other => other,
            })
    }

    /// Whether clients are asked for certificates, and whether they must have one.
    pub fn client_certificate_mode(&self) -> Option<ClientCertificates> {
        self.clients.as_ref().map(|(_, mode)| *mode)
    }

    fn build(
        chain: Vec<CertificateDer<'static>>,
        key: Arc<PrivateKeyDer<'static>>,
        clients: Option<(Arc<RootCertStore>, ClientCertificates)>,
    ) -> Result<Self, TlsError> {
        let provider = provider();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|err| TlsError::Invalid(format!("TLS cannot be set up: {err}")))?;
        let builder = match &clients {
            None => builder.with_no_client_auth(),
            Some((roots, mode)) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider);
                let verifier = match mode {
                    ClientCertificates::Required => verifier,
                    ClientCertificates::Optional => verifier.allow_unauthenticated(),
                };
                let verifier = verifier.build().map_err(|err| {
                    TlsError::Invalid(format!("the client CA cannot verify clients: {err}"))
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|err| {
                TlsError::Invalid(format!(
                    "the server certificate and key cannot be used: {err}"
                ))
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            chain,
            key,
            clients,
            config: Arc::new(config),
        })
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|cause| TlsError::Read {
        what,
        path: path.to_owned(),
        cause,
    })
}

fn in_file(err: TlsError, chain: &Path, key: &Path) -> TlsError {
    match err {
        TlsError::Invalid(message) => TlsError::Invalid(format!(
            "{message} (certificate `{}`, key `{}`)",
            chain.display(),
            key.display()
        )),
        other => other,
    }
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::Invalid(format!("{what} is not valid PEM: {err}")))?;
    if certs.is_empty() {
        return Err(TlsError::Invalid(format!(
            "{what} holds no PEM `CERTIFICATE`"
        )));
    }
    Ok(certs)
}

/// The client certificate a TLS connection presented, as an identity.
#[derive(Debug, Clone)]
pub(crate) struct PeerCertificate {
    pub(crate) identity: Identity,
    /// The end of its validity, in Unix seconds.
    pub(crate) not_after: i64,
}

impl PeerCertificate {
    /// The identity of a verified end-entity certificate (DER); `None` if its subject cannot
    /// be read.
    pub(crate) fn from_der(der: &[u8]) -> Option<Self> {
        let info = CertificateInfo::from_der(der).ok()?;
        let subject = info
            .common_name
            .filter(|cn| !cn.is_empty())
            .unwrap_or_else(|| info.subject.clone());
        Some(Self {
            identity: Identity::Certificate {
                subject,
                distinguished_name: info.subject,
                issuer: info.issuer,
            },
            not_after: info.not_after,
        })
    }

    /// Whether the certificate is past its validity now.
    pub(crate) fn expired(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        i64::try_from(now).unwrap_or(i64::MAX) > self.not_after
    }
}
