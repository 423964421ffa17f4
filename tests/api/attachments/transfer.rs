//! The bytes back: whole or one range, 304 on the ETag, and thumbnails of images drawn within
//! the bounds of every decode (a bomb is 422, never a 500).

use super::{File, content, dimensions, png, png_declaring, upload};
use crate::support::{Clinic, assert_error, assert_invalid, assert_status, id_of};

#[tokio::test]
async fn a_range_is_answered_exactly_and_the_etag_answers_304() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    // Over two 256 KiB chunks, so that ranges cross chunks.
    let bytes = png(700, 400);
    assert!(bytes.len() > 300 * 1024, "{}", bytes.len());
    let file = File { bytes: bytes.clone(), sent_as: "image/png", name: "wide.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    let whole = content(app, branch, patient, id, "", &[]).await;
    assert_status(&whole, 200);
    assert_eq!(whole.bytes, bytes);
    let tag = whole.header("etag").unwrap().to_owned();
    assert_eq!(tag.trim_matches('"').len(), 64, "the ETag is the SHA-256");

    let (first, last) = (262_000usize, 262_999usize);
    let part = content(app, branch, patient, id, "", &[("range", "bytes=262000-262999")]).await;
    assert_status(&part, 206);
    assert_eq!(part.bytes, bytes[first..=last]);
    assert_eq!(part.header("content-range"), Some(format!("bytes 262000-262999/{}", bytes.len()).as_str()));
    let tail = content(app, branch, patient, id, "", &[("range", "bytes=-100")]).await;
    assert_status(&tail, 206);
    assert_eq!(tail.bytes, bytes[bytes.len() - 100..]);
    let past = format!("bytes={}-", bytes.len());
    let refused = content(app, branch, patient, id, "", &[("range", &past)]).await;
    assert_error(&refused, 416, "range_not_satisfiable");
    assert_eq!(refused.header("content-range"), Some(format!("bytes */{}", bytes.len()).as_str()));

    let unchanged = content(app, branch, patient, id, "", &[("if-none-match", &tag)]).await;
    assert_status(&unchanged, 304);
    assert!(unchanged.bytes.is_empty());
    let other = content(app, branch, patient, id, "", &[("if-none-match", "\"abc\"")]).await;
    assert_status(&other, 200);
}

#[tokio::test]
async fn thumbnails_fit_their_side_and_a_bomb_or_a_document_is_422() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(600, 300), sent_as: "image/png", name: "wide.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    let jpeg = File {
        bytes: super::picture(90, 300, image::ImageFormat::Jpeg),
        sent_as: "image/jpeg",
        name: "t.jpg",
    };
    let tall = id_of(&upload(app, branch, patient, &jpeg).await);
    let tiff = File {
        bytes: super::picture(50, 40, image::ImageFormat::Tiff),
        sent_as: "image/tiff",
        name: "s.tif",
    };
    let small = id_of(&upload(app, branch, patient, &tiff).await);
    for (id, side, expected) in [(id, 256, (256, 128)), (tall, 100, (30, 100)), (small, 256, (50, 40))] {
        let r = content(app, branch, patient, id, &format!("?thumbnail={side}"), &[]).await;
        assert_status(&r, 200);
        assert_eq!(r.header("content-type"), Some("image/png"));
        assert_eq!(dimensions(&r.bytes), expected);
    }
    for side in ["8", "2000", "big"] {
        let r = content(app, branch, patient, id, &format!("?thumbnail={side}"), &[]).await;
        assert_invalid(&r, &["thumbnail"]);
    }

    // 100000 x 100000 pixels declared in a few hundred bytes: kept (the file is what it is),
    // never decoded past its bounds.
    let bomb = File { bytes: png_declaring(100_000, 100_000), sent_as: "image/png", name: "bomb.png" };
    assert!(bomb.bytes.len() < 1024);
    let bomb = id_of(&upload(app, branch, patient, &bomb).await);
    let r = content(app, branch, patient, bomb, "?thumbnail=256", &[]).await;
    assert_error(&r, 422, "image_pixels");
    assert!(r.body["errors"]["thumbnail"].is_array(), "{}", r.text);

    let pdf = File { bytes: b"%PDF-1.4\n%%EOF\n".to_vec(), sent_as: "application/pdf", name: "a.pdf" };
    let pdf = id_of(&upload(app, branch, patient, &pdf).await);
    assert_invalid(&content(app, branch, patient, pdf, "?thumbnail=64", &[]).await, &["thumbnail"]);
}
