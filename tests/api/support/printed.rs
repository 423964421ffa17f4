//! Reading printed documents as a person would: their text extracted by `pdftotext` and
//! their pages rendered to PNG by `pdftoppm` (Debian's poppler-utils, which `.ci/run`
//! installs). With `PRINTED_PAGES_DIR` set, the pages of each rendered document are kept
//! there as `<name>.png` (the first) and `<name>-<n>.png` (the others), to be looked at.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Reply, TestApp, assert_status, reply};

/// A scratch folder of its own for one document.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "clinic-printed-{}-{name}-{}",
        std::process::id(),
        &clinic_server::security::tokens::random_secret()[..8]
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(command: &mut Command) -> Vec<u8> {
    let out = command.output().unwrap_or_else(|e| panic!("{command:?} (poppler-utils installed?): {e}"));
    assert!(out.status.success(), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// The text of `pdf` in reading order of its content (`pdftotext -raw`), without the
/// embedding marks pdftotext puts around right-to-left words (U+202A to U+202E).
pub fn text(pdf: &[u8]) -> String {
    let dir = scratch("text");
    let file = dir.join("document.pdf");
    std::fs::write(&file, pdf).unwrap();
    let text = run(Command::new("pdftotext").arg("-raw").arg("-enc").arg("UTF-8").arg(&file).arg("-"));
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(text).expect("pdftotext writes UTF-8");
    text.chars().filter(|c| !('\u{202A}'..='\u{202E}').contains(c)).collect()
}

/// `text` with every run of white space taken out, for values a line may have wrapped.
pub fn squashed(text: &str) -> String {
    text.split_whitespace().collect()
}

/// Renders every page of `pdf` to PNG and answers how many there are; each must be a PNG of
/// an A4 page's proportions. With `PRINTED_PAGES_DIR`, they are kept as `<name>.png` (the
/// first) and `<name>-<n>.png`.
pub fn render_pages(pdf: &[u8], name: &str) -> usize {
    let dir = scratch(name);
    let file = dir.join("document.pdf");
    std::fs::write(&file, pdf).unwrap();
    run(Command::new("pdftoppm").arg("-png").arg("-r").arg("72").arg(&file).arg(dir.join("page")));
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    pages.sort();
    for page in &pages {
        let bytes = std::fs::read(page).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", page.display());
        let (width, height) = png_size(&bytes);
        // A4 is 595.28 x 841.89 points: a pixel a point, rounded either way.
        assert!(
            (595..=596).contains(&width) && (841..=842).contains(&height),
            "{} is {width} x {height}",
            page.display()
        );
    }
    if let Ok(keep) = std::env::var("PRINTED_PAGES_DIR") {
        std::fs::create_dir_all(&keep).unwrap();
        for (i, page) in pages.iter().enumerate() {
            let kept = if i == 0 { format!("{name}.png") } else { format!("{name}-{}.png", i + 1) };
            std::fs::copy(page, Path::new(&keep).join(kept)).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    pages.len()
}

fn png_size(png: &[u8]) -> (u32, u32) {
    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// A PNG image of `size` x `size` pixels: a blue disc on white, as a logo.
pub fn png_logo(size: u32) -> Vec<u8> {
    use std::io::Write;
    let mut raw = Vec::new();
    let centre = size as f32 / 2.0;
    for y in 0..size {
        raw.push(0); // no filter
        for x in 0..size {
            let inside = (x as f32 - centre).hypot(y as f32 - centre) < centre * 0.8;
            raw.extend(if inside { [20, 90, 170] } else { [255, 255, 255] });
        }
    }
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    deflate.write_all(&raw).unwrap();
    let data = deflate.finish().unwrap();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend(size.to_be_bytes());
    header.extend(size.to_be_bytes());
    header.extend([8, 2, 0, 0, 0]); // 8-bit RGB
    png_chunk(&mut png, b"IHDR", &header);
    png_chunk(&mut png, b"IDAT", &data);
    png_chunk(&mut png, b"IEND", &[]);
    png
}

/// `GET path` in `branch` with `accept` as the only Accept header, as the holder of `token`.
pub fn get_accepting(
    app: &TestApp,
    token: &str,
    path: &str,
    branch: i64,
    accept: &str,
) -> reqwest::RequestBuilder {
    app.http
        .get(app.url(path))
        .bearer_auth(token)
        .header("x-branch-id", branch.to_string())
        .header("accept", accept)
}

/// `GET path` in `branch` with `Accept: application/pdf`, as the holder of `token`.
pub async fn get_pdf(app: &TestApp, token: &str, path: &str, branch: i64) -> Reply {
    reply(get_accepting(app, token, path, branch, "application/pdf")).await
}

/// The bytes of a PDF answer, checked to be one.
pub async fn pdf_of(app: &TestApp, token: &str, path: &str, branch: i64) -> Vec<u8> {
    let r = get_pdf(app, token, path, branch).await;
    assert_status(&r, 200);
    assert_eq!(r.header("content-type"), Some("application/pdf"), "{path}");
    let disposition = r.header("content-disposition");
    assert!(disposition.is_some_and(|d| d.starts_with("inline; filename=") && d.ends_with(".pdf\"")));
    assert!(r.bytes.starts_with(b"%PDF-"), "{path}: not a PDF");
    r.bytes
}

/// Appends a PNG chunk of `kind` holding `body`, with its length and CRC.
pub fn png_chunk(png: &mut Vec<u8>, kind: &[u8], body: &[u8]) {
    png.extend((body.len() as u32).to_be_bytes());
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(body);
    png.extend(kind);
    png.extend(body);
    png.extend(crc.sum().to_be_bytes());
}
