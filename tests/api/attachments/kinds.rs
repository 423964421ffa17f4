//! Every kind a chart keeps is taken, judged by its bytes; anything else, or a file declared
//! as another kind, is 415 `unsupported_media`.

use reqwest::Method;
use serde_json::Value;

use super::{File, attachments, content, picture, png, upload, upload_as};
use crate::support::printed::pdf_of;
use crate::support::{Clinic, assert_error, assert_invalid, assert_status, id_of, reply, tool_present};

/// A DICOM Part 10 file written by pydicom (`pip install pydicom`), or `None` with a note
/// where it is missing, unless `PYDICOM=required`.
fn dicom_file() -> Option<Vec<u8>> {
    let path = std::env::temp_dir().join(format!("clinic-dicom-{}.dcm", std::process::id()));
    let script = r#"
import sys
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid
meta = FileMetaDataset()
meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.77.1.5.1"
meta.MediaStorageSOPInstanceUID = generate_uid()
meta.TransferSyntaxUID = ExplicitVRLittleEndian
ds = Dataset()
ds.file_meta = meta
ds.PatientName = "Cruz^Ana"
ds.PatientID = "P-1"
ds.Modality = "OP"
ds.SOPClassUID = meta.MediaStorageSOPClassUID
ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
ds.Rows = 2
ds.Columns = 2
ds.BitsAllocated = 8
ds.BitsStored = 8
ds.HighBit = 7
ds.SamplesPerPixel = 1
ds.PhotometricInterpretation = "MONOCHROME2"
ds.PixelRepresentation = 0
ds.PixelData = bytes([0, 64, 128, 255])
ds.save_as(sys.argv[1], enforce_file_format=True)
"#;
    let out = std::process::Command::new("python3").args(["-c", script]).arg(&path).output();
    match out {
        Ok(out) if out.status.success() => {
            let bytes = std::fs::read(&path).ok();
            let _ = std::fs::remove_file(&path);
            bytes
        }
        other => {
            let said = other.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default();
            let why = said.trim().lines().last().unwrap_or_default();
            let missing = format!("pydicom not found (pip install pydicom; python3 said {why:?})");
            tool_present(false, "PYDICOM", &missing, "the DICOM upload is skipped");
            None
        }
    }
}

#[tokio::test]
async fn every_kind_is_taken_by_its_bytes_and_answered_as_it_was_sent() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let summary = format!("/api/v1/patient-visits/{}/summary", clinic.visit);
    let pdf = pdf_of(app, &app.admin_token, &summary, branch).await;
    let tiff = picture(40, 30, image::ImageFormat::Tiff);
    let jpeg = picture(64, 48, image::ImageFormat::Jpeg);
    let mut files = vec![
        (File { bytes: pdf, sent_as: "application/pdf", name: "summary.pdf" }, "pdf"),
        (File { bytes: png(20, 10), sent_as: "image/png", name: "fundus.png" }, "png"),
        (File { bytes: jpeg, sent_as: "image/jpeg", name: "eye.jpg" }, "jpeg"),
        (File { bytes: tiff, sent_as: "application/octet-stream", name: "scan.tif" }, "tiff"),
    ];
    if let Some(dicom) = dicom_file() {
        files.push((File { bytes: dicom, sent_as: "application/dicom", name: "oct.dcm" }, "dicom"));
    }
    for (file, kind) in &files {
        let r = upload(app, branch, patient, file).await;
        assert_status(&r, 201);
        let record = &r.body["data"];
        assert_eq!(record["kind"], *kind, "{}", file.name);
        assert_eq!(record["filename"], file.name);
        assert_eq!(record["patient_id"], patient);
        assert_eq!(record["bytes"], file.bytes.len() as u64);
        assert_eq!(record["sha256"].as_str().unwrap().len(), 64);
        assert!(record["created_at"].is_string() && record["created_by"].is_i64(), "{record}");
        let back = content(app, branch, patient, id_of(&r), "", &[]).await;
        assert_status(&back, 200);
        assert_eq!(back.bytes, file.bytes, "{} reads back as it was sent", file.name);
        assert_eq!(back.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(back.header("accept-ranges"), Some("bytes"));
        assert!(back.header("content-disposition").unwrap().contains(file.name));
    }
    let listed = app.get(&attachments(patient), Some(branch)).await;
    assert_status(&listed, 200);
    assert_eq!(listed.body["data"].as_array().unwrap().len(), files.len());
    assert_eq!(listed.body["meta"]["total"], files.len());
}

#[tokio::test]
async fn a_file_declared_as_another_kind_or_of_no_known_kind_is_415() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let as_pdf = File { bytes: png(8, 8), sent_as: "application/pdf", name: "fake.pdf" };
    let r = upload(app, branch, patient, &as_pdf).await;
    assert_error(&r, 415, "unsupported_media");
    assert!(r.body["message"].as_str().unwrap().contains("PNG"), "{}", r.text);
    let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let random = File { bytes: noise, sent_as: "application/octet-stream", name: "noise.bin" };
    assert_error(&upload(app, branch, patient, &random).await, 415, "unsupported_media");
    let text = File { bytes: b"%PDF-1.7 but said to be text".to_vec(), sent_as: "text/plain", name: "a.txt" };
    assert_error(&upload(app, branch, patient, &text).await, 415, "unsupported_media");
    let listed = app.get(&attachments(patient), Some(branch)).await;
    assert_eq!(listed.body["meta"]["total"], 0, "nothing was kept");
}

#[tokio::test]
async fn a_form_carries_the_file_with_its_title_and_visit_and_ties_are_the_patients_own() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let fields = [("title", "Fundus photo".to_owned()), ("visit_id", clinic.visit.to_string())];
    let (boundary, body) = form_of(&png(12, 12), "réfraction.png", "image/png", &fields);
    let r = reply(
        app.request(Method::POST, &attachments(patient), Some(branch))
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body),
    )
    .await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["title"], "Fundus photo");
    assert_eq!(r.body["data"]["visit_id"], clinic.visit);
    assert_eq!(r.body["data"]["filename"], "réfraction.png");

    // Another patient's visit, and an examination named without its kind.
    let other = id_of(&app.create_patient(branch, "Ben", "Santos").await);
    let file = File { bytes: png(9, 9), sent_as: "image/png", name: "x.png" };
    let r =
        upload_as(app, &app.admin_token, branch, other, &file, &format!("?visit_id={}", clinic.visit)).await;
    assert_invalid(&r, &["visit_id"]);
    let r = upload_as(app, &app.admin_token, branch, patient, &file, "?examination_id=5").await;
    assert_invalid(&r, &["examination_kind"]);
    // An unknown patient is 404.
    assert_status(&upload(app, branch, 999_999, &file).await, 404);
    let listed = app.get(&attachments(other), Some(branch)).await;
    assert_eq!(listed.body["data"], Value::Array(Vec::new()));
}

/// An attachment tied to an examination names it by its kind and id, and answers that kind;
/// an id of another examination (the fourteen share one table), or of another patient's, is
/// a 422 on `examination_id`.
#[tokio::test]
async fn an_examination_is_tied_by_its_own_kind_and_the_patients_own_record() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let admin = app.admin_id().await;
    let db = clinic_server::db::connect(&app.db.url).await.unwrap();
    let tonometry: i64 = db
        .query_one(
            &format!(
                "INSERT INTO branch_{branch}.examinations (exam, patient_id, patient_visit_id, examiner_id, right_eye)
                 VALUES ('tonometry', $1, $2, $3, '{{}}') RETURNING id"
            ),
            &[&patient, &clinic.visit, &admin],
        )
        .await
        .unwrap()
        .get(0);
    let file = File { bytes: png(9, 9), sent_as: "image/png", name: "iop.png" };
    let tied = format!("?examination_kind=tonometries&examination_id={tonometry}");
    let r = upload_as(app, &app.admin_token, branch, patient, &file, &tied).await;
    assert_status(&r, 201);
    assert_eq!(r.body["data"]["examination_kind"], "tonometries", "{}", r.text);
    assert_eq!(r.body["data"]["examination_id"], tonometry);

    let file = File { bytes: png(8, 8), sent_as: "image/png", name: "rx.png" };
    let misnamed = format!("?examination_kind=refractions&examination_id={tonometry}");
    assert_invalid(
        &upload_as(app, &app.admin_token, branch, patient, &file, &misnamed).await,
        &["examination_id"],
    );
    let other = id_of(&app.create_patient(branch, "Ben", "Santos").await);
    assert_invalid(&upload_as(app, &app.admin_token, branch, other, &file, &tied).await, &["examination_id"]);
}

/// A `multipart/form-data` body with `file` in the part `file` and `fields` beside it.
fn form_of(file: &[u8], name: &str, sent_as: &str, fields: &[(&str, String)]) -> (String, Vec<u8>) {
    let boundary = "clinic-form-boundary-7d1f";
    let mut body = Vec::new();
    for (field, value) in fields {
        body.extend(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n")
                .bytes(),
        );
    }
    body.extend(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: {sent_as}\r\n\r\n"
        )
        .bytes(),
    );
    body.extend_from_slice(file);
    body.extend(format!("\r\n--{boundary}--\r\n").bytes());
    (boundary.to_owned(), body)
}
