//! Response compression: zstd, br or gzip, whichever the client's `Accept-Encoding` prefers,
//! for bodies of 1 KiB or more (a smaller body gains less than the encoder costs).
//!
//! Only the types listed here are compressed. Event streams are left out on purpose: an
//! encoder holds bytes back until it has enough, and a waiting-room display must see each
//! event when it is sent. The levels are low because the same cores serve the requests.

use salvo::compression::{Compression, CompressionLevel};
use salvo::http::Mime;

/// Smallest body worth compressing.
pub const MIN_BYTES: usize = 1024;

/// What is compressed: the API's JSON, FHIR answers, exports and the documentation page.
const TYPES: &[&str] = &[
    "application/json",
    "application/fhir+json",
    "application/x-ndjson",
    "text/csv",
    "text/html",
    "text/css",
    "text/plain",
    "application/javascript",
];

pub fn compression() -> Compression {
    let types: Vec<Mime> = TYPES.iter().map(|t| t.parse().expect("a listed MIME type parses")).collect();
    Compression::new()
        .disable_all()
        .enable_zstd(CompressionLevel::Precise(3))
        .enable_brotli(CompressionLevel::Precise(4))
        .enable_gzip(CompressionLevel::Precise(4))
        .content_types(&types)
        .min_length(MIN_BYTES)
}
