//! The printed forms of clinical records: a medical certificate, and a visit's summary with
//! every record of the visit the caller may read. Each is signed by hand, once printed, by
//! the doctor it names: the certificate's doctor, the visit's.

use salvo::async_trait;
use serde_json::Value;

use crate::http::error::ApiResult;
use crate::pdf::{Block, Sheet, Signing};
use crate::resource::Resource;
use crate::resource::field::{Kind, Target};
use crate::resource::printable::{Printable, Printing, shown, text};

pub struct Certificate;

pub static CERTIFICATE: Certificate = Certificate;

/// The visit's date, for the documents that name it.
async fn visit_date(printing: &mut Printing<'_>, visit: Option<i64>) -> ApiResult<String> {
    let Some(visit) = visit else { return Ok(String::new()) };
    let sql = "SELECT visit_date::text FROM patient_visits WHERE id = $1";
    Ok(printing.row(sql, &[&visit]).await?.map(|r| r.get(0)).unwrap_or_default())
}

#[async_trait]
impl Printable for Certificate {
    fn describes(&self) -> &'static str {
        "The medical certificate"
    }

    fn file_name(&self, record: &Value) -> String {
        format!("certificate-{}", text(record, "certificate_number"))
    }

    async fn sheet(&self, printing: &mut Printing<'_>, record: &Value) -> ApiResult<Sheet> {
        let patient = record["patient_id"].as_i64().unwrap_or_default();
        let mut patient_fields = printing.patient_fields(patient).await?;
        let name = patient_fields.first().map(|(_, name)| name.clone()).unwrap_or_default();
        let seen_on = visit_date(printing, record["patient_visit_id"].as_i64()).await?;
        patient_fields.push(("Visit date".into(), seen_on.clone()));
        // The certifying doctor signs the printed copy, whoever signed it in the system.
        let doctor = printing.doctor_signs(record["doctor_id"].as_i64()).await?;
        let rest = match record["rest_days"].as_i64() {
            Some(1) => "1 day".to_owned(),
            Some(days) => format!("{days} days"),
            None => String::new(),
        };
        let branch = printing.ctx.branch()?.name.clone();
        let statement = format!("This is to certify that {name} was seen at {branch} on {seen_on}.");
        Ok(Sheet {
            title: "Medical certificate".into(),
            reference: Some(text(record, "certificate_number")),
            blocks: vec![
                Block::Fields(patient_fields),
                Block::Text(statement),
                Block::Fields(vec![
                    ("Issued on".into(), printing.value(record, "issued_on")),
                    ("Doctor".into(), doctor.name.clone()),
                    ("Diagnosis".into(), printing.value(record, "diagnosis")),
                    ("Recommendation".into(), printing.value(record, "recommendation")),
                    ("Rest".into(), rest),
                    ("Valid until".into(), printing.value(record, "valid_until")),
                ]),
            ],
            signing: printing.signing(record).await?,
            sign_here: Some(doctor),
            footer: String::new(),
        })
    }
}

/// The key of a kind of record in a visit's summary: the last segment of its path, so that a
/// nested kind (`patient-visits/{id}/diagnoses`) goes by its own name.
pub fn record_key(kind: &Resource) -> String {
    kind.path.rsplit('/').next().unwrap_or(kind.path).replace('-', "_")
}

/// The summary of a visit, as `GET /patient-visits/{id}/summary` answers it in JSON.
pub struct VisitSummary {
    /// The kinds of record the caller may read, in the answer's order.
    pub kinds: Vec<&'static Resource>,
}

/// Fields every record of a visit names and the summary shows once, or not at all.
const SHOWN_ONCE: &[&str] = &["patient_id", "patient_visit_id", "status", "signed_by", "signed_at"];

impl VisitSummary {
    /// One field of a record as the page shows it: references by name where the name is
    /// known to the summary (staff, doctors, medicines), values as text.
    async fn value(&self, printing: &mut Printing<'_>, kind: Kind, value: &Value) -> ApiResult<String> {
        if let (Kind::Timestamp { .. }, Some(at)) = (kind, value.as_str()) {
            return printing.local_time(at).await;
        }
        let Some(id) = value.as_i64() else { return Ok(shown(Some(kind), value)) };
        Ok(match kind {
            Kind::Ref(Target::Staff) => printing.user_name(id).await?,
            Kind::Ref(Target::Registry("doctors")) => printing.doctor(Some(id)).await?.0,
            Kind::Ref(Target::Registry("medicines")) => {
                let sql = "SELECT concat_ws(' ', generic_name, nullif(strength, ''), form) FROM medicines WHERE id = $1";
                printing
                    .registry_row(sql, &[&id])
                    .await?
                    .map(|r| r.get(0))
                    .unwrap_or_else(|| format!("#{id}"))
            }
            _ => shown(Some(kind), value),
        })
    }

    /// The fields of one record, with who signed it for records that are signed.
    async fn record(
        &self,
        printing: &mut Printing<'_>,
        kind: &Resource,
        record: &Value,
    ) -> ApiResult<Vec<(String, String)>> {
        let mut fields = Vec::new();
        for field in kind.all_fields().filter(|f| !SHOWN_ONCE.contains(&f.name)) {
            let value = &record[field.name];
            if value.is_null() || value.as_str() == Some("") {
                continue;
            }
            let label = field.name.trim_end_matches("_id").replace('_', " ");
            fields.push((capitalised(&label), self.value(printing, field.kind, value).await?));
        }
        if kind.actions.iter().any(|a| a.name == "sign") {
            let signed = match printing.signing(record).await? {
                Signing::Signed { signer, at } => format!("{signer}, {at}"),
                _ => "DRAFT: not signed".to_owned(),
            };
            fields.push(("Signed".into(), signed));
        }
        Ok(fields)
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[async_trait]
impl Printable for VisitSummary {
    fn describes(&self) -> &'static str {
        "The visit summary"
    }

    fn patient_of(&self, record: &Value) -> Option<i64> {
        record["visit"]["patient_id"].as_i64()
    }

    fn file_name(&self, record: &Value) -> String {
        format!("visit-{}-{}", text(&record["visit"], "visit_date"), text(&record["visit"], "id"))
    }

    async fn sheet(&self, printing: &mut Printing<'_>, summary: &Value) -> ApiResult<Sheet> {
        let visit = &summary["visit"];
        let patient = self.patient_of(summary).unwrap_or_default();
        let mut patient_fields = printing.patient_fields(patient).await?;
        patient_fields.push(("Allergies".into(), printing.allergies(patient).await?));
        let mut blocks = vec![Block::Fields(patient_fields)];
        // The visit's doctor signs the printed summary.
        let doctor = printing.doctor_signs(visit["doctor_id"].as_i64()).await?;
        blocks.push(Block::Heading("Visit".into()));
        blocks.push(Block::Fields(vec![
            ("Date".into(), printing.value(visit, "visit_date")),
            ("Type".into(), printing.value(visit, "visit_type")),
            ("Status".into(), printing.value(visit, "status")),
            ("Doctor".into(), doctor.name.clone()),
            ("Reason".into(), printing.value(visit, "reason")),
            ("Notes".into(), printing.value(visit, "notes")),
        ]));
        // The summary is final once the visit is completed and every signed kind of record
        // in it is signed; its signers are theirs.
        let mut signers: Vec<String> = Vec::new();
        let mut last_signed: Option<String> = None;
        let mut unsigned = text(visit, "status") != "completed";
        for kind in &self.kinds {
            let key = record_key(kind);
            let records = summary["records"][&key].as_array().cloned().unwrap_or_default();
            if records.is_empty() {
                continue;
            }
            blocks.push(Block::Heading(format!("{} ({})", kind.label, records.len())));
            for record in &records {
                blocks.push(Block::Fields(self.record(printing, kind, record).await?));
                if !kind.actions.iter().any(|a| a.name == "sign") {
                    continue;
                }
                match (record["signed_by"].as_i64(), record["signed_at"].as_str()) {
                    (Some(by), Some(at)) => {
                        let name = printing.user_name(by).await?;
                        if !signers.contains(&name) {
                            signers.push(name);
                        }
                        if last_signed.as_deref().is_none_or(|last| at > last) {
                            last_signed = Some(at.to_owned());
                        }
                    }
                    _ => unsigned = true,
                }
            }
        }
        let signing = match (unsigned, last_signed) {
            (true, _) => Signing::Unsigned,
            (false, Some(at)) => {
                Signing::Signed { signer: signers.join(", "), at: printing.local_time(&at).await? }
            }
            (false, None) => Signing::NotSigned,
        };
        Ok(Sheet {
            title: "Visit summary".into(),
            reference: Some(text(visit, "visit_date")),
            blocks,
            signing,
            sign_here: Some(doctor),
            footer: String::new(),
        })
    }
}
