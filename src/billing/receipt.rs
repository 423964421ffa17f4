//! A posted payment printed as a receipt. Charges, discounts, refunds and payments not
//! posted (open, voided) have no printed form. The receipt is signed by whoever posted the
//! payment, when they posted it: the audit log's record of that write says who. Its printed
//! copy is signed again by hand on the cashier's line.

use salvo::async_trait;
use serde_json::Value;

use crate::http::error::ApiResult;
use crate::pdf::{Block, Sheet, SignHere, Signing};
use crate::resource::printable::{Printable, Printing, text};

pub struct Receipt;

pub static RECEIPT: Receipt = Receipt;

#[async_trait]
impl Printable for Receipt {
    fn describes(&self) -> &'static str {
        "A posted payment as a receipt"
    }

    fn refuses(&self, record: &Value) -> Option<&'static str> {
        (record["kind"] != "payment" || record["status"] != "posted")
            .then_some("Only a posted payment prints, as a receipt.")
    }

    fn file_name(&self, record: &Value) -> String {
        format!("receipt-{}", text(record, "number"))
    }

    async fn sheet(&self, printing: &mut Printing<'_>, record: &Value) -> ApiResult<Sheet> {
        let id = record["id"].as_i64().unwrap_or_default();
        let patient = printing.patient_fields(record["patient_id"].as_i64().unwrap_or_default()).await?;
        let method = match record["payment_method_id"].as_i64() {
            Some(method) => {
                let sql = "SELECT name FROM payment_methods WHERE id = $1";
                printing.registry_row(sql, &[&method]).await?.map(|r| r.get(0)).unwrap_or_default()
            }
            None => String::new(),
        };
        // Posted on creation or by the post action; the latest such write is the posting.
        let sql = "SELECT user_id FROM audit_log
                    WHERE resource = $1 AND record_id = $2 AND user_id IS NOT NULL
                      AND (action = 'post' OR (action = 'create' AND after->>'status' = 'posted'))
                    ORDER BY at DESC, id DESC LIMIT 1";
        let resource = printing.resource.path();
        let poster: Option<i64> = printing.row(sql, &[&resource, &id]).await?.map(|r| r.get(0));
        let cashier = match poster {
            Some(user) => Some(printing.user_name(user).await?),
            None => None,
        };
        let signing = match &cashier {
            Some(cashier) => Signing::Signed {
                signer: cashier.clone(),
                at: printing.local_time(&text(record, "posted_at")).await?,
            },
            None => Signing::Unsigned,
        };
        // The cashier who took the payment signs the printed copy; a receipt takes no stamp.
        let cashier =
            SignHere { name: cashier.unwrap_or_default(), details: vec!["Cashier".into()], stamp: false };
        Ok(Sheet {
            title: "Receipt".into(),
            reference: Some(text(record, "number")),
            blocks: vec![
                Block::Fields(patient),
                Block::Fields(vec![
                    ("Amount received".into(), printing.value(record, "amount")),
                    ("Payment method".into(), method),
                    ("Reference".into(), printing.value(record, "reference")),
                    ("Transaction date".into(), printing.value(record, "transaction_date")),
                    ("Description".into(), printing.value(record, "description")),
                ]),
            ],
            signing,
            sign_here: Some(cashier),
            footer: String::new(),
        })
    }
}
