//! Documents and images in a patient's chart: PDFs, JPEG, PNG and TIFF images, DICOM files.
//!
//! - `POST /patients/{patient_id}/attachments` takes the file as the body (or the part `file`
//!   of a form), streamed to a temporary file, hashed and bounded on the way (`receive`); its
//!   kind is judged by its first bytes (`kinds`), never by its name or declared type, which
//!   must not name another kind (415 `unsupported_media`). The bytes are kept once per branch
//!   (`storage`: the branch's database in 256 KiB chunks, or an object store, `objects`), and
//!   a content already in the patient's chart is not added twice: the upload answers the
//!   record it is already (200, not 201). `ATTACHMENT_BRANCH_QUOTA_BYTES` bounds what a branch
//!   keeps: uploads take their turn on an advisory lock of the branch while they count and
//!   keep, so that concurrent ones never pass it together (413 `quota_exceeded`).
//! - The list and a record are the declaration's shared reads (audited as reads that name the
//!   patient); `GET .../{id}/content` answers the bytes (`content`: ETag, ranges, thumbnails),
//!   audited as a read too; FHIR's `Binary` read answers the same content through
//!   [`open_content`], audited the same way.
//! - `DELETE .../{id}` takes a `reason` (body or query) and hides the record; its bytes stay,
//!   with the audit trail of who read them.
//!
//! A merge of patients moves attachments with the rest of the chart (the declaration is
//! nested under the patient), and a branch's backup, restore and move copy its three tables
//! like every other.

mod content;
mod kinds;
mod objects;
mod receive;
mod record;
mod storage;
mod writes;

use salvo::oapi::{Object, PathItemType};

use crate::http::docs::{self, Doc};
use crate::http::endpoints::Endpoints;
use crate::http::guard::Produces;

pub use content::{Content, open_content};
pub use record::ATTACHMENTS;

/// Media types an upload may be sent as (beside a form).
const SENT_AS: &[&str] = &[
    "application/pdf",
    "image/jpeg",
    "image/png",
    "image/tiff",
    "application/dicom",
    "application/octet-stream",
];

/// What the content route answers.
const ANSWERS: &[&str] = &["application/pdf", "image/jpeg", "image/png", "image/tiff", "application/dicom"];

/// What the content route may be asked for: the files, and JSON for its errors.
const PRODUCED: &[&str] =
    &["application/pdf", "image/jpeg", "image/png", "image/tiff", "application/dicom", "application/json"];

const COLLECTION: &str = "patients/{patient_id:num}/attachments";
const MEMBER: &str = "patients/{patient_id:num}/attachments/{id:num}";

/// The upload, the content and the delete (the list and a record are the declaration's).
pub fn add_endpoints(branch: &mut Endpoints) {
    let record = || salvo::oapi::Ref::from_schema_name("Attachment");
    let form = Object::new()
        .property("title", docs::string().max_length(200))
        .property("visit_id", docs::id())
        .property("examination_kind", docs::string())
        .property("examination_id", docs::id());
    let op = branch
        .operation("attachments", "Add a document or an image to the patient's chart")
        .description(
            "The body is the file, named by `Content-Disposition: attachment; filename=\"...\"` \
             (or `filename*=UTF-8''...`), with `title`, `visit_id`, `examination_kind` and `examination_id` \
             as query parameters; or a `multipart/form-data` form with the part `file` and those fields. \
             The kind is judged by the bytes. The same content twice for one patient is kept once: the \
             second upload answers the record already there (200). `Idempotency-Key` replays the first \
             answer; the key's claim is of the headers and query (type, length, name), not of the bytes.",
        )
        .add_parameter(docs::path_param("patient_id"))
        .add_parameter(docs::query("title", docs::string().max_length(200), "A title (raw body)"))
        .add_parameter(docs::query("visit_id", docs::id(), "A visit of the patient (raw body)"))
        .add_parameter(docs::query(
            "examination_kind",
            docs::string(),
            "An examination's path, e.g. refractions",
        ))
        .add_parameter(docs::query(
            "examination_id",
            docs::id(),
            "An examination of the patient, with its kind",
        ));
    let op = Doc::with_file_body(op, SENT_AS, form);
    let op = Doc::answers(op, "201", "Kept", docs::envelope(record()));
    let op = Doc::answers(
        op,
        "200",
        "The same content is already in the chart: that record",
        docs::envelope(record()),
    );
    let op = Doc::error(
        op,
        "413",
        "payload_too_large: over ATTACHMENT_MAX_BYTES; quota_exceeded: over the branch's quota",
    );
    let op = Doc::error(
        op,
        "415",
        "unsupported_media: not a PDF, JPEG, PNG, TIFF or DICOM file, or declared as another kind",
    );
    let op = Doc::invalid(op, "A visit or examination not of this patient, or a bad title");
    let op = Doc::error(op, "400", "The body or form could not be read");
    let op = Doc::error(op, "408", "The body did not arrive in time");
    branch.add(PathItemType::Post, COLLECTION, "uploadAttachment", writes::upload, Doc::not_found(op));

    let op = branch
        .operation("attachments", "Remove an attachment from the chart, with a reason")
        .add_parameter(docs::path_param("patient_id"))
        .add_parameter(docs::path_id())
        .add_parameter(docs::query(
            "reason",
            docs::string().max_length(500),
            "Why (or `reason` in the body)",
        ));
    let op = Doc::answers(op, "200", "Removed", Object::new().property("message", docs::string()));
    let op = Doc::invalid(Doc::stale(op), "reason missing or too long");
    branch.add_taking(
        PathItemType::Delete,
        MEMBER,
        "deleteAttachment",
        &writes::REMOVAL,
        writes::remove,
        Doc::not_found(op),
    );

    let op = branch
        .operation("attachments", "The attachment's bytes, or a thumbnail of an image")
        .add_parameter(docs::path_param("patient_id"))
        .add_parameter(docs::path_id())
        .add_parameter(docs::query(
            "thumbnail",
            docs::integer()
                .minimum(i64::from(*content::THUMBNAIL_SIDES.start()))
                .maximum(i64::from(*content::THUMBNAIL_SIDES.end())),
            "A PNG of an image at most this many pixels on its longest side",
        ));
    let op = Doc::answers_bytes(op, "200", "The file (ETag: its SHA-256)", ANSWERS);
    let op = Doc::answers_bytes(op, "206", "The range asked for, with Content-Range", ANSWERS);
    let op = op.add_response("304", salvo::oapi::Response::new("If-None-Match matched the ETag"));
    let op = Doc::error(op, "416", "range_not_satisfiable: the range starts past the end");
    let op = Doc::invalid(
        op,
        "thumbnail out of range, of a file that is not an image, or an image too large to decode",
    );
    branch.add_behind(
        PathItemType::Get,
        &format!("{MEMBER}/content"),
        "getAttachmentContent",
        Some(Produces(PRODUCED)),
        content::content,
        Doc::not_found(op),
    );
}
