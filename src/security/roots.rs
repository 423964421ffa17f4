//! The CAs a TLS client trusts: those of a PEM file an operator names, else the public
//! roots (webpki-roots, compiled in: the same in a bare container as on a workstation).
//! Used by the connections to PostgreSQL (`db::tls`) and to the OTLP collector.

use std::path::Path;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The certificates of the PEM file at `path` (one or several); `setting` names where it
/// was given, and the error says `setting=path` and what is wrong with it.
pub fn from_pem_file(path: &Path, setting: &str) -> Result<RootCertStore, String> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| format!("{setting}={shown}: cannot read it ({e})"))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{setting}={shown}: not a PEM file of certificates ({e})"))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!("{setting}={shown}: holds no usable certificate"));
    }
    Ok(roots)
}

/// The public roots.
pub fn public() -> RootCertStore {
    RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() }
}
