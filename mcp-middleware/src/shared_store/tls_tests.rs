//! `rediss://` against a real `redis-server` serving TLS, with certificates made by the
//! `openssl` command for each test: the server's certificate is verified (a CA file that did
//! not issue it is refused), and a client certificate is presented when given.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::test_server::{listening, trust};
use super::{SharedStore, StoreError};

/// A directory of certificates, removed when dropped: `ca.pem` issued `server.pem` (for
/// 127.0.0.1) and `client.pem`; `other-ca.pem` issued nothing here.
struct Certificates {
    dir: PathBuf,
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Certificates {
    fn make(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mcpm-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(err) = std::fs::create_dir_all(&dir) {
            panic!("cannot create {}: {err}", dir.display());
        }
        let made = Self { dir };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            let (key, pem) = (format!("{ca}.key"), format!("{ca}.pem"));
            let subject = format!("/CN=mcpm test {ca}");
            made.openssl(
                &[
                    &["req", "-x509"][..],
                    &ec,
                    &[
                        "-keyout", &key, "-out", &pem, "-days", "1", "-subj", &subject,
                    ],
                ]
                .concat(),
            );
        }
        std::fs::write(made.path("server.ext"), "subjectAltName=IP:127.0.0.1\n")
            .unwrap_or_else(|err| panic!("server.ext: {err}"));
        std::fs::write(made.path("client.ext"), "extendedKeyUsage=clientAuth\n")
            .unwrap_or_else(|err| panic!("client.ext: {err}"));
        for leaf in ["server", "client"] {
            let (key, csr, pem, ext) = (
                format!("{leaf}.key"),
                format!("{leaf}.csr"),
                format!("{leaf}.pem"),
                format!("{leaf}.ext"),
            );
            let subject = format!("/CN=mcpm test {leaf}");
            made.openssl(
                &[
                    &["req"][..],
                    &ec,
                    &["-keyout", &key, "-out", &csr, "-subj", &subject],
                ]
                .concat(),
            );
            made.openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "1",
                "-extfile",
                &ext,
            ]);
        }
        made
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn openssl(&self, args: &[&str]) {
        let done = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match done {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!("openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr)),
            Err(err) => panic!("openssl could not run (is it installed?): {err}"),
        }
    }
}

/// A `redis-server` serving only TLS on a free port, killed when dropped.
struct TlsServer {
    child: Child,
    url: String,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start(certs: &Certificates, clients: &str) -> TlsServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|err| panic!("no free port: {err}"));
    let arg = |file: &str| certs.path(file).to_string_lossy().into_owned();
    let child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(["--save", "", "--tls-auth-clients", clients])
        .args([
            "--tls-cert-file",
            &arg("server.pem"),
            "--tls-key-file",
            &arg("server.key"),
        ])
        .args(["--tls-ca-cert-file", &arg("ca.pem")])
        // Its log, read until it is ready.
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|err| panic!("redis-server could not start: {err}"));
    let mut server = TlsServer {
        child,
        url: format!("rediss://127.0.0.1:{port}/0"),
    };
    listening(&mut server.child).await;
    server
}

fn ca(certs: &Certificates, file: &str) -> super::StoreTrust {
    trust().ca_file(certs.path(file))
}

fn path(certs: &Certificates, file: &str) -> PathBuf {
    certs.path(file)
}

#[tokio::test]
async fn a_verified_server_is_used_and_an_unknown_one_refused() -> Result<(), StoreError> {
    let certs = Certificates::make("verify");
    let server = start(&certs, "no").await;
    let store = SharedStore::redis(&server.url, "tls", &ca(&certs, "ca.pem")).await?;
    store.ping().await?;
    // A CA that did not issue the server's certificate: no connection, an error naming it.
    match SharedStore::redis(&server.url, "tls", &ca(&certs, "other-ca.pem")).await {
        Err(StoreError::Unavailable { store, .. }) => assert_eq!(store, server.url),
        other => panic!("an unknown server was used: {other:?}"),
    }
    // Nor do the system's roots know it.
    assert!(
        SharedStore::redis(&server.url, "tls", &trust())
            .await
            .is_err()
    );
    // `#insecure` (no verification, in the redis crate) is refused before any connection.
    let insecure = format!("{}#insecure", server.url);
    assert!(matches!(
        SharedStore::redis(&insecure, "tls", &ca(&certs, "other-ca.pem")).await,
        Err(StoreError::Config { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn a_client_certificate_is_presented_when_given() -> Result<(), StoreError> {
    let certs = Certificates::make("client");
    let server = start(&certs, "yes").await;
    let without = SharedStore::redis(&server.url, "tls", &ca(&certs, "ca.pem")).await;
    assert!(without.is_err(), "the server asks for a certificate");
    let with = ca(&certs, "ca.pem")
        .client_identity(path(&certs, "client.pem"), path(&certs, "client.key"));
    SharedStore::redis(&server.url, "tls", &with)
        .await?
        .ping()
        .await?;
    // Certificates for a plain redis:// URL, or files that are not there: a clear error.
    let plain = server.url.replacen("rediss://", "redis://", 1);
    assert!(matches!(
        SharedStore::redis(&plain, "tls", &with).await,
        Err(StoreError::Config { reason, .. }) if reason.contains("rediss://")
    ));
    let missing = trust().ca_file(Path::new("/nonexistent/ca.pem"));
    assert!(matches!(
        SharedStore::redis(&server.url, "tls", &missing).await,
        Err(StoreError::Config { reason, .. }) if reason.contains("/nonexistent/ca.pem")
    ));
    Ok(())
}
