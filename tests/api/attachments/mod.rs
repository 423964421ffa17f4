//! Documents and images in a patient's chart (`/patients/{patient_id}/attachments`): real
//! files of every kind (a PDF the server printed, PNG, JPEG and TIFF images drawn here, a
//! DICOM file written by pydicom), judged by their bytes, kept once, bounded, streamed back
//! whole or in ranges, thumbnailed within bounds, removed with a reason, and audited.

mod access;
mod kinds;
mod limits;
mod moves;
mod stores;
mod transfer;

use std::io::Cursor;

use reqwest::Method;

use crate::support::{Reply, TestApp, reply};

pub fn attachments(patient: i64) -> String {
    format!("/api/v1/patients/{patient}/attachments")
}

/// A file to send: its bytes, the Content-Type it is sent as and its name.
pub struct File<'a> {
    pub bytes: Vec<u8>,
    pub sent_as: &'a str,
    pub name: &'a str,
}

/// `POST` of `file` as the raw body, as `token`, with `query` (`?title=...`) after the path.
pub async fn upload_as(
    app: &TestApp,
    token: &str,
    branch: i64,
    patient: i64,
    file: &File<'_>,
    query: &str,
) -> Reply {
    let path = format!("{}{query}", attachments(patient));
    reply(
        app.request_as(token, Method::POST, &path, Some(branch))
            .header("content-type", file.sent_as)
            .header("content-disposition", format!("attachment; filename=\"{}\"", file.name))
            .body(file.bytes.clone()),
    )
    .await
}

/// [`upload_as`] the admin.
pub async fn upload(app: &TestApp, branch: i64, patient: i64, file: &File<'_>) -> Reply {
    upload_as(app, &app.admin_token, branch, patient, file, "").await
}

/// `GET .../{id}/content` with extra headers.
pub async fn content(
    app: &TestApp,
    branch: i64,
    patient: i64,
    id: i64,
    query: &str,
    headers: &[(&str, &str)],
) -> Reply {
    let path = format!("{}/{id}/content{query}", attachments(patient));
    let mut req = app.request(Method::GET, &path, Some(branch)).header("accept", "*/*");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    reply(req).await
}

/// An RGB picture of `width` x `height` of noise (which compresses little), encoded as
/// `format`.
pub fn picture(width: u32, height: u32, format: image::ImageFormat) -> Vec<u8> {
    let noise = |x: u32, y: u32, salt: u32| {
        ((x.wrapping_mul(73_856_093) ^ y.wrapping_mul(19_349_663) ^ salt).wrapping_mul(2_654_435_761) >> 24)
            as u8
    };
    let pixels = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([noise(x, y, 1), noise(x, y, 2), noise(x, y, 3)])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(pixels).write_to(&mut Cursor::new(&mut out), format).unwrap();
    out
}

pub fn png(width: u32, height: u32) -> Vec<u8> {
    picture(width, height, image::ImageFormat::Png)
}

/// A PNG whose header declares `width` x `height` pixels and whose data is a few bytes: a
/// decompression bomb's shape, in under 1 KB.
pub fn png_declaring(width: u32, height: u32) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend(width.to_be_bytes());
    header.extend(height.to_be_bytes());
    header.extend([8, 2, 0, 0, 0]);
    crate::support::printed::png_chunk(&mut png, b"IHDR", &header);
    crate::support::printed::png_chunk(&mut png, b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    crate::support::printed::png_chunk(&mut png, b"IEND", &[]);
    png
}

/// The width and height of the PNG or JPEG `bytes`.
pub fn dimensions(bytes: &[u8]) -> (u32, u32) {
    image::ImageReader::new(Cursor::new(bytes)).with_guessed_format().unwrap().into_dimensions().unwrap()
}

/// The patient's access log entries as `(action, resource, record_id, route)`.
pub async fn access_log(
    app: &TestApp,
    branch: i64,
    patient: i64,
) -> Vec<(String, String, Option<i64>, String)> {
    let r = app.get(&format!("/api/v1/patients/{patient}/access-log?perPage=100"), Some(branch)).await;
    crate::support::assert_status(&r, 200);
    r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (text("action"), text("resource"), e["record_id"].as_i64(), text("route"))
        })
        .collect()
}

/// `bytes`' SHA-256 in hex, as the server keeps it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
