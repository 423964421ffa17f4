//! A logo is an untrusted image: it is refused by the size its header declares before any
//! pixel is allocated, decoded whole before it is kept, and a stored one that cannot be read
//! never fails a document. After every refusal the server still answers.

use std::io::Write;
use std::process::Command;

use reqwest::Method;

use super::{letterhead, nguyen, shows};
use crate::support::printed::{self, pdf_of, png_chunk, png_logo};
use crate::support::{Clinic, TestApp, assert_invalid, assert_status, reply};

/// A JPEG of 48 x 48 pixels (a blue disc on white, as `cjpeg -quality 85` wrote it).
const JPEG_LOGO: &[u8] = include_bytes!("../data/logo.jpg");

fn zlib(raw: &[u8]) -> Vec<u8> {
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    deflate.write_all(raw).unwrap();
    deflate.finish().unwrap()
}

/// A PNG whose header declares `width` x `height` at `depth` bits in `color_type`, with
/// `data` as its one IDAT chunk; every chunk's CRC is right.
fn png(width: u32, height: u32, depth: u8, color_type: u8, data: &[u8]) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend(width.to_be_bytes());
    header.extend(height.to_be_bytes());
    header.extend([depth, color_type, 0, 0, 0]);
    png_chunk(&mut png, b"IHDR", &header);
    png_chunk(&mut png, b"IDAT", data);
    png_chunk(&mut png, b"IEND", &[]);
    png
}

/// `JPEG_LOGO` declaring `width` x `height` in its frame header, its scan unchanged.
fn jpeg_declaring(width: u16, height: u16) -> Vec<u8> {
    let mut jpeg = JPEG_LOGO.to_vec();
    let frame = jpeg.windows(2).position(|pair| pair == [0xFF, 0xC0]).unwrap();
    jpeg[frame + 5..frame + 7].copy_from_slice(&height.to_be_bytes());
    jpeg[frame + 7..frame + 9].copy_from_slice(&width.to_be_bytes());
    jpeg
}

/// `JPEG_LOGO` with its entropy-coded scan replaced by noise, its headers and end marker kept.
fn jpeg_with_garbage_after_the_header() -> Vec<u8> {
    let mut jpeg = JPEG_LOGO.to_vec();
    let scan = jpeg.windows(2).position(|pair| pair == [0xFF, 0xDA]).unwrap();
    let header = u16::from_be_bytes([jpeg[scan + 2], jpeg[scan + 3]]) as usize;
    let end = jpeg.len() - 2;
    let mut seed: u32 = 12_345;
    for byte in &mut jpeg[scan + 2 + header..end] {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        *byte = (seed >> 16) as u8;
    }
    jpeg
}

fn upload(app: &TestApp, branch: i64, content_type: &str, body: Vec<u8>) -> reqwest::RequestBuilder {
    app.request(Method::PUT, &format!("/api/v1/branches/{branch}/logo"), None)
        .header("content-type", content_type)
        .body(body)
}

/// How many images `pdf` draws (`pdfimages -list`; a PNG's alpha is listed apart as `smask`).
fn images_in(pdf: &[u8]) -> usize {
    let file = std::env::temp_dir().join(format!("clinic-logo-{}-{}.pdf", std::process::id(), pdf.len()));
    std::fs::write(&file, pdf).unwrap();
    let out = Command::new("pdfimages").arg("-list").arg(&file).output().expect("pdfimages (poppler-utils)");
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "pdfimages: {}", String::from_utf8_lossy(&out.stderr));
    let list = String::from_utf8(out.stdout).unwrap();
    list.lines().skip(2).filter(|line| line.split_whitespace().nth(2) == Some("image")).count()
}

#[tokio::test]
async fn a_logo_is_refused_by_its_declared_size_or_an_unreadable_stream_and_the_server_stays_up() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let kept = png_logo(32);
    assert_status(&reply(upload(&app, branch, "image/png", kept.clone())).await, 200);

    let good = png_logo(64);
    let (idat_at, idat_len) = {
        let at = good.windows(4).position(|w| w == b"IDAT").unwrap() - 4;
        (at, u32::from_be_bytes(good[at..at + 4].try_into().unwrap()) as usize)
    };
    let idat = &good[idat_at + 8..idat_at + 8 + idat_len];
    let mut bad_crc = good.clone();
    bad_crc[idat_at + 8 + idat_len + 3] ^= 0xFF;
    let mut bad_adler = idat.to_vec();
    *bad_adler.last_mut().unwrap() ^= 0xFF;
    // One row of zeros for a 100,000-pixel-wide image, compressed: the whole file is ~1 kB.
    let row_of_zeros = zlib(&vec![0; 300_001]);

    let png_cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a 100,000 x 100,000 bomb", png(100_000, 100_000, 8, 2, &row_of_zeros), "100000 x 100000 pixels"),
        (
            "8,000 x 8,000: under the side, over the pixels",
            png(8_000, 8_000, 8, 2, &row_of_zeros),
            "8000 x 8000 pixels",
        ),
        // 16 million pixels (under the pixel bound) of 16-bit RGBA: 122 MiB to hold.
        ("4,000 x 4,000 at 64 bits a pixel", png(4_000, 4_000, 16, 6, &row_of_zeros), "MiB"),
        ("truncated in its data", good[..good.len() / 2].to_vec(), "cannot be read"),
        ("without its end chunk", good[..good.len() - 12].to_vec(), "cannot be read"),
        ("a bad CRC", bad_crc, "cannot be read"),
        (
            "data that is not zlib",
            png(64, 64, 8, 2, b"this is not a zlib stream, only text"),
            "cannot be read",
        ),
        ("a bad Adler-32 checksum", png(64, 64, 8, 2, &bad_adler), "cannot be read"),
    ];
    let jpeg_cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a 65,535 x 65,535 bomb", jpeg_declaring(65_535, 65_535), "over 16384 pixels a side"),
        (
            "16,000 x 16,000: under the side, over the pixels",
            jpeg_declaring(16_000, 16_000),
            "16000 x 16000 pixels",
        ),
        ("truncated in its scan", JPEG_LOGO[..JPEG_LOGO.len() / 2].to_vec(), "cannot be read"),
        ("cut before its end marker", JPEG_LOGO[..JPEG_LOGO.len() - 2].to_vec(), "cannot be read"),
        ("garbage after the header", jpeg_with_garbage_after_the_header(), "cannot be read"),
    ];
    for (content_type, cases) in [("image/png", png_cases), ("image/jpeg", jpeg_cases)] {
        for (case, bytes, says) in cases {
            assert!(bytes.len() < 8 * 1024, "{case}: {} bytes", bytes.len());
            for sent_as in [content_type, "application/octet-stream"] {
                let r = reply(upload(&app, branch, sent_as, bytes.clone())).await;
                assert_invalid(&r, &["logo"]);
                assert_eq!(r.body["code"], "validation_failed", "{case}");
                let message = r.body["errors"]["logo"][0].as_str().unwrap();
                assert!(message.contains(says), "{case}: {message}");
                // Still up, and the logo kept is the one set before.
                let logo = reply(
                    app.request(Method::GET, &format!("/api/v1/branches/{branch}/logo"), None)
                        .header("accept", "image/*"),
                )
                .await;
                assert_status(&logo, 200);
                assert_eq!(logo.header("content-type"), Some("image/png"), "{case}");
                assert_status(&app.get(&format!("/api/v1/branches/{branch}"), None).await, 200);
            }
        }
    }

    // The real ones of each kind are taken, and kept as they were sent.
    assert_status(&reply(upload(&app, branch, "image/jpeg", JPEG_LOGO.to_vec())).await, 200);
    let logo = app
        .request(Method::GET, &format!("/api/v1/branches/{branch}/logo"), None)
        .header("accept", "image/*");
    let res = reply(logo).await;
    assert_eq!(res.header("content-type"), Some("image/jpeg"));
    assert_eq!(res.bytes, JPEG_LOGO);
}

#[tokio::test]
async fn a_stored_logo_that_cannot_be_read_prints_the_document_without_it() {
    let Clinic { app, branch, .. } = Clinic::open().await;
    letterhead(&app, branch).await;
    let (_, visit) = nguyen(&app, branch).await;
    let path = format!("/api/v1/patient-visits/{visit}/summary");
    let pdf = pdf_of(&app, &app.admin_token, &path, branch).await;
    assert_eq!(images_in(&pdf), 1, "the PNG logo is drawn");

    assert_status(&reply(upload(&app, branch, "image/jpeg", JPEG_LOGO.to_vec())).await, 200);
    assert_eq!(images_in(&pdf_of(&app, &app.admin_token, &path, branch).await), 1, "the JPEG logo is drawn");

    // Logos written around the upload's checks: damaged, and a bomb.
    let good = png_logo(96);
    let stored = [
        ("image/png", good[..good.len() / 2].to_vec()),
        ("image/png", png(100_000, 100_000, 8, 2, &zlib(&vec![0; 300_001]))),
        ("image/jpeg", jpeg_with_garbage_after_the_header()),
        ("image/jpeg", b"\xFF\xD8\xFF not a JPEG after all".to_vec()),
    ];
    let registry = clinic_server::db::connect(&app.db.url).await.unwrap();
    for (media_type, bytes) in stored {
        registry
            .execute(
                "UPDATE branches SET logo = $2, logo_media_type = $3 WHERE id = $1",
                &[&branch, &bytes, &media_type],
            )
            .await
            .unwrap();
        let pdf = pdf_of(&app, &app.admin_token, &path, branch).await;
        assert_eq!(images_in(&pdf), 0, "{media_type} of {} bytes", bytes.len());
        let text = printed::text(&pdf);
        shows(&text, "Main Branch");
        shows(&text, "Nguyễn Thị Peña");
    }
}
