//! `DocumentReference` (a patient's attachments) and `Binary` (their bytes): valid R4,
//! searched by patient and date, the bytes as sent (raw or base64 in FHIR JSON, bounded),
//! every Binary read in the patient's access log, no reach from another branch or without
//! `attachments.read`, and a removed attachment gone.

use base64::Engine;
use reqwest::Method;

use super::*;
use crate::attachments::{File, access_log, attachments, png, sha256_hex, upload, upload_as};

const RESOURCE: &str = "patients/{patient_id}/attachments";

fn pdf(text: &str) -> Vec<u8> {
    format!("%PDF-1.4\n% {text}\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")
        .into_bytes()
}

/// `GET path` as the administrator in `branch`, with `accept` its only Accept header.
fn get_accepting(app: &TestApp, branch: i64, path: &str, accept: &str) -> reqwest::RequestBuilder {
    app.http
        .get(app.url(path))
        .bearer_auth(&app.admin_token)
        .header("x-branch-id", branch.to_string())
        .header("accept", accept)
}

/// `GET /fhir/r4/Binary/{id}` as the administrator with `accept`.
async fn binary(app: &TestApp, branch: i64, id: i64, query: &str, accept: &str) -> Reply {
    reply(get_accepting(app, branch, &format!("/fhir/r4/Binary/{id}{query}"), accept)).await
}

#[tokio::test]
async fn a_pdf_and_a_png_are_document_references_whose_binaries_are_their_bytes() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let report = File { bytes: pdf("referral"), sent_as: "application/pdf", name: "referral.pdf" };
    let query = format!("?visit_id={}&title=Referral%20letter", clinic.visit);
    let r = upload_as(app, &app.admin_token, branch, patient, &report, &query).await;
    assert_status(&r, 201);
    let pdf_id = id_of(&r);
    let picture = File { bytes: png(24, 16), sent_as: "image/png", name: "fundus.png" };
    let png_id = id_of(&upload(app, branch, patient, &picture).await);
    // Another patient's file is not in this patient's search.
    let other = id_of(&app.create_patient(branch, "Ben", "Santos").await);
    let theirs = File { bytes: png(8, 8), sent_as: "image/png", name: "other.png" };
    assert_status(&upload(app, branch, other, &theirs).await, 201);

    let bundle =
        fhir(app, branch, &format!("/fhir/r4/DocumentReference?patient=Patient/{patient}"), 200).await;
    assert_eq!(bundle["total"], 2, "{bundle}");
    let mut found = ids(&bundle);
    found.sort();
    let mut expected = vec![pdf_id.to_string(), png_id.to_string()];
    expected.sort();
    assert_eq!(found, expected);

    let document = with_id(&bundle, &pdf_id.to_string());
    assert_eq!(document["status"], "current");
    assert_eq!(document["subject"]["reference"], format!("Patient/{patient}"));
    assert_eq!(document["description"], "Referral letter");
    assert_eq!(document["context"]["encounter"][0]["reference"], format!("Encounter/{}", clinic.visit));
    assert!(document["date"].as_str().is_some_and(|d| d.contains('T')), "{document}");
    let attachment = &document["content"][0]["attachment"];
    assert_eq!(attachment["contentType"], "application/pdf");
    assert_eq!(attachment["size"], report.bytes.len());
    assert_eq!(attachment["title"], "referral.pdf");
    let url = attachment["url"].as_str().unwrap();
    assert!(url.starts_with("http") && url.ends_with(&format!("/fhir/r4/Binary/{pdf_id}")), "{url}");
    let r = reply(get_accepting(app, branch, &url[app.base.len()..], "*/*")).await;
    assert_status(&r, 200);
    assert_eq!(r.bytes, report.bytes, "the url reads the bytes");
    assert!(attachment.get("hash").is_none(), "R4's hash is a SHA-1: {attachment}");
    assert_eq!(document["identifier"][0]["system"], "urn:clinic-server:attachment-sha256");
    assert_eq!(document["identifier"][0]["value"], sha256_hex(&report.bytes));

    let image = with_id(&bundle, &png_id.to_string());
    assert_eq!(image["content"][0]["attachment"]["contentType"], "image/png");
    assert_eq!(image["description"], "fundus.png");
    assert!(image.get("context").is_none(), "tied to no visit: {image}");

    // By id, by _id and by date.
    let read = fhir(app, branch, &format!("/fhir/r4/DocumentReference/{png_id}"), 200).await;
    assert_eq!(read["id"], png_id.to_string());
    let by_id = fhir(app, branch, &format!("/fhir/r4/DocumentReference?_id={pdf_id}"), 200).await;
    assert_eq!(ids(&by_id), vec![pdf_id.to_string()]);
    let path = format!("/fhir/r4/DocumentReference?patient={patient}&date=ge2020-01-01");
    assert_eq!(fhir(app, branch, &path, 200).await["total"], 2);
    let path = format!("/fhir/r4/DocumentReference?patient={patient}&date=lt2020-01-01");
    assert_eq!(fhir(app, branch, &path, 200).await["total"], 0);

    // The bytes, raw with their media type, and as a Binary in FHIR JSON.
    for (id, file, media) in [(pdf_id, &report, "application/pdf"), (png_id, &picture, "image/png")] {
        for accept in ["*/*", media] {
            let r = binary(app, branch, id, "", accept).await;
            assert_status(&r, 200);
            assert_eq!(r.header("content-type"), Some(media), "Accept: {accept}");
            assert_eq!(r.bytes, file.bytes, "Accept: {accept}");
            assert_eq!(r.header("etag"), Some(format!("\"{}\"", sha256_hex(&file.bytes)).as_str()));
        }
        let r = binary(app, branch, id, "", FHIR_JSON).await;
        assert_fhir(&r, 200);
        assert_eq!(r.body["resourceType"], "Binary");
        assert_eq!(r.body["id"], id.to_string());
        assert_eq!(r.body["contentType"], media);
        assert_eq!(r.body["securityContext"]["reference"], format!("Patient/{patient}"));
        let data =
            base64::engine::general_purpose::STANDARD.decode(r.body["data"].as_str().unwrap()).unwrap();
        assert_eq!(data, file.bytes);
        let r = binary(app, branch, id, "?_format=json", "*/*").await;
        assert_status(&r, 200);
        assert_eq!(r.body["resourceType"], "Binary", "_format=json asks for FHIR JSON");
        validate_with_fhir_resources(std::slice::from_ref(&r.body));
    }
    // A range, as the content route answers one.
    let path = format!("/fhir/r4/Binary/{png_id}");
    let r = reply(get_accepting(app, branch, &path, "image/png").header("range", "bytes=0-7")).await;
    assert_status(&r, 206);
    assert_eq!(r.bytes, picture.bytes[..8]);
    // Asked for as a media type that is not the file's.
    assert_status(&binary(app, branch, pdf_id, "", "image/png").await, 406);

    let metadata = fhir(app, branch, "/fhir/r4/metadata", 200).await;
    let served: Vec<&str> = metadata["rest"][0]["resource"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert!(served.contains(&"DocumentReference") && served.contains(&"Binary"), "{served:?}");
    let everything =
        fhir(app, branch, &format!("/fhir/r4/Patient/{patient}/$everything?_count=100"), 200).await;
    let documents =
        resources(&everything).iter().filter(|r| r["resourceType"] == "DocumentReference").count();
    assert_eq!(documents, 2);
    validate_with_fhir_resources(&[bundle, read, by_id, metadata, everything]);
}

#[tokio::test]
async fn a_binary_too_large_for_json_is_refused_as_json_and_streams_as_bytes() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let mut bytes = pdf("large");
    bytes.resize(8 * 1024 * 1024 + 1, b' ');
    let file = File { bytes, sent_as: "application/pdf", name: "large.pdf" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    let r = binary(app, branch, id, "", FHIR_JSON).await;
    assert_outcome(&r, 406, "not-supported", "binary_too_large");
    let r = binary(app, branch, id, "", "application/pdf").await;
    assert_status(&r, 200);
    assert_eq!(r.bytes.len(), file.bytes.len());
    assert!(r.bytes == file.bytes);
}

#[tokio::test]
async fn a_binary_read_is_in_the_access_log_and_no_one_else_reads_it() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(14, 14), sent_as: "image/png", name: "a.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    assert_status(&binary(app, branch, id, "", "image/png").await, 200);
    assert_fhir(&binary(app, branch, id, "", FHIR_JSON).await, 200);
    let log = access_log(app, branch, patient).await;
    let binary_reads = log
        .iter()
        .filter(|(a, r, record, route)| {
            a == "view" && r == RESOURCE && *record == Some(id) && route.ends_with("/fhir/r4/Binary/{id}")
        })
        .count();
    assert_eq!(binary_reads, 2, "{log:?}");

    // Not from another branch, whose records it is not.
    let other = app.create_branch("NORTH").await;
    assert_outcome(&binary(app, other, id, "", FHIR_JSON).await, 404, "not-found", "not_found");
    assert_status(&binary(app, other, id, "", "image/png").await, 404);
    let bundle = fhir(app, other, &format!("/fhir/r4/DocumentReference?patient={patient}"), 200).await;
    assert_eq!(bundle["total"], 0);
    // Not without attachments.read.
    let (_, desk) = app.create_user("desk", &["receptionist"], &[branch]).await;
    let path = format!("/fhir/r4/Binary/{id}");
    let r = reply(app.request_as(&desk, Method::GET, &path, Some(branch)).header("accept", FHIR_JSON)).await;
    assert_outcome(&r, 403, "forbidden", "forbidden");
    let r = get_as(app, Some(&desk), &format!("/fhir/r4/DocumentReference?patient={patient}"), Some(branch))
        .await;
    assert_outcome(&r, 403, "forbidden", "forbidden");
    // Nothing else was read: the log holds no more Binary reads than the two.
    let log = access_log(app, branch, patient).await;
    let after = log.iter().filter(|(_, _, _, route)| route.ends_with("/fhir/r4/Binary/{id}")).count();
    assert_eq!(after, 2, "{log:?}");
}

#[tokio::test]
async fn a_removed_attachment_is_gone_from_the_search_and_its_reads_are_410() {
    let clinic = Clinic::open().await;
    let (app, branch, patient) = (&clinic.app, clinic.branch, clinic.patient);
    let file = File { bytes: png(15, 15), sent_as: "image/png", name: "a.png" };
    let id = id_of(&upload(app, branch, patient, &file).await);
    let kept = File { bytes: pdf("kept"), sent_as: "application/pdf", name: "kept.pdf" };
    let kept = id_of(&upload(app, branch, patient, &kept).await);
    let r = app.delete(&format!("{}/{id}?reason=Wrong%20patient", attachments(patient)), Some(branch)).await;
    assert_status(&r, 200);
    let bundle = fhir(app, branch, &format!("/fhir/r4/DocumentReference?patient={patient}"), 200).await;
    assert_eq!(ids(&bundle), vec![kept.to_string()]);
    let r =
        get_as(app, Some(&app.admin_token), &format!("/fhir/r4/DocumentReference/{id}"), Some(branch)).await;
    assert_outcome(&r, 410, "not-found", "deleted");
    assert_outcome(&binary(app, branch, id, "", FHIR_JSON).await, 410, "not-found", "deleted");
    assert_status(&binary(app, branch, id, "", "image/png").await, 410);
    assert_outcome(&binary(app, branch, 999_999, "", FHIR_JSON).await, 404, "not-found", "not_found");
}
