//! An appointment printed as the slip the patient takes home: who, with whom, for which
//! service, when (the local date and time in the branch's zone, which the letterhead names
//! with the branch's address), its status and its reason. A slip is not signed.

use salvo::async_trait;
use serde_json::Value;

use crate::http::error::ApiResult;
use crate::pdf::{Block, Sheet, Signing};
use crate::resource::printable::{Printable, Printing, text};

pub struct Slip;

pub static SLIP: Slip = Slip;

/// The local day and the local times of `[starts_at, ends_at)` in the branch's zone, as
/// "Monday 7 January 2030" and "09:00 to 09:15 (Asia/Manila)".
const LOCAL: &str =
    "SELECT to_char($1::text::timestamptz AT TIME ZONE $3, 'FMDay FMDD FMMonth YYYY (YYYY-MM-DD)'),
                            to_char($1::text::timestamptz AT TIME ZONE $3, 'HH24:MI'),
                            to_char($2::text::timestamptz AT TIME ZONE $3, 'HH24:MI')";

#[async_trait]
impl Printable for Slip {
    fn describes(&self) -> &'static str {
        "The appointment slip"
    }

    fn file_name(&self, record: &Value) -> String {
        format!("appointment-{}", text(record, "id"))
    }

    async fn sheet(&self, printing: &mut Printing<'_>, record: &Value) -> ApiResult<Sheet> {
        let mut patient = printing.patient_fields(record["patient_id"].as_i64().unwrap_or_default()).await?;
        // The slip names the patient, not their birth date and sex.
        patient.truncate(2);
        let (doctor, _) = printing.doctor(record["doctor_id"].as_i64()).await?;
        let service = match record["branch_service_id"].as_i64() {
            Some(id) => {
                let sql = "SELECT name FROM branch_services WHERE id = $1";
                printing.registry_row(sql, &[&id]).await?.map(|r| r.get(0)).unwrap_or_default()
            }
            None => String::new(),
        };
        let zone = printing.ctx.branch()?.timezone.clone();
        let (starts, ends) = (text(record, "starts_at"), text(record, "ends_at"));
        let (day, from, to): (String, String, String) = printing
            .row(LOCAL, &[&starts, &ends, &zone])
            .await?
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .unwrap_or_default();
        let minutes = text(record, "duration_minutes");
        let mut when = vec![
            ("Date".into(), day),
            ("Time".into(), format!("{from} to {to} ({zone})")),
            ("Length".into(), format!("{minutes} minutes")),
            ("Status".into(), printing.value(record, "status")),
        ];
        if record["status"] == "cancelled" {
            when.push(("Cancelled because".into(), printing.value(record, "cancel_reason")));
        }
        let mut blocks = vec![
            Block::Fields(patient),
            Block::Fields(vec![("Doctor".into(), doctor), ("Service".into(), service)]),
            Block::Fields(when),
        ];
        let reason = printing.value(record, "reason");
        if !reason.is_empty() {
            blocks.push(Block::Heading("Reason".into()));
            blocks.push(Block::Text(reason));
        }
        Ok(Sheet {
            title: "Appointment slip".into(),
            reference: Some(format!("No. {}", text(record, "id"))),
            blocks,
            signing: Signing::NotSigned,
            sign_here: None,
            footer: String::new(),
        })
    }
}
