//! The allergy check of a dispense: completing a transaction that dispenses a medicine the
//! patient has an active allergy to is 409 `allergy_conflict` naming the allergies; an
//! override needs a reason and `pharmacy.allergy_override`, and is kept and audited; an
//! inactive or resolved allergy does not stop it.

use reqwest::Method;
use serde_json::{Value, json};

use super::Pharmacy;
use crate::support::{assert_error, assert_status, id_of};

/// A pharmacy with a patient allergic (severely) to the medicine of a stocked item.
struct Allergic {
    p: Pharmacy,
    patient: i64,
    medicine: i64,
    item: i64,
    allergy: i64,
}

impl Allergic {
    async fn open() -> Self {
        let p = Pharmacy::open().await;
        let medicine = json!({ "generic_name": "Atropine", "strength": "1%", "form": "drops",
                               "route": "ophthalmic", "unit": "bottle" });
        let medicine = id_of(&p.app.created("/api/v1/medicines", None, medicine).await);
        let item = json!({ "code": "ATROPINE", "name": "Atropine 1% drops", "unit": "bottle",
                           "sale_price": "80.00", "has_expiry": false, "medicine_id": medicine });
        let item = id_of(&p.app.created("/api/v1/pharmacy-items", None, item).await);
        p.lot(p.branch, item, "A-1", None, 10).await;
        p.lot(p.branch, p.item, "T-1", None, 10).await;
        let patient = id_of(&p.app.create_patient(p.branch, "Rosa", "Dizon").await);
        let allergy = json!({ "medicine_id": medicine, "severity": "severe", "reaction": "Tachycardia" });
        let allergies = format!("/api/v1/patients/{patient}/allergies");
        let allergy = id_of(&p.app.created(&allergies, Some(p.branch), allergy).await);
        Self { p, patient, medicine, item, allergy }
    }

    /// A draft for the patient dispensing one Atropine and one Timolol.
    async fn draft(&self) -> i64 {
        let lines = json!([{ "pharmacy_item_id": self.item, "quantity": "1" },
                           { "pharmacy_item_id": self.p.item, "quantity": "1" }]);
        let body = json!({ "branch_id": self.p.branch, "patient_id": self.patient, "lines": lines });
        id_of(&self.p.app.created("/api/v1/transactions", None, body).await)
    }

    async fn complete_as(&self, token: &str, transaction: i64, body: Value) -> crate::support::Reply {
        let path = format!("/api/v1/transactions/{transaction}/complete");
        self.p.app.call_as(token, Method::POST, &path, None, body).await
    }

    async fn status_of(&self, transaction: i64) -> Value {
        let r = self.p.app.get(&format!("/api/v1/transactions/{transaction}"), None).await;
        assert_status(&r, 200);
        r.body["data"].clone()
    }
}

#[tokio::test]
async fn dispensing_a_medicine_the_patient_is_allergic_to_is_refused_naming_the_allergy() {
    let a = Allergic::open().await;
    let draft = a.draft().await;
    let admin = a.p.app.admin_token.clone();
    let r = a.complete_as(&admin, draft, json!({})).await;
    assert_error(&r, 409, "allergy_conflict");
    let named = r.body["allergies"].as_array().unwrap_or_else(|| panic!("no allergies: {}", r.text));
    assert_eq!(named.len(), 1, "{}", r.text);
    assert_eq!(named[0]["id"], a.allergy);
    assert_eq!(named[0]["medicine_id"], a.medicine);
    assert_eq!(named[0]["medicine"], "Atropine 1%");
    assert_eq!(named[0]["severity"], "severe");
    // Nothing was taken and the draft stays a draft; a blank reason is no reason.
    assert_eq!(a.status_of(draft).await["status"], "draft");
    assert_error(
        &a.complete_as(&admin, draft, json!({ "override_reason": "   " })).await,
        409,
        "allergy_conflict",
    );
    assert_eq!(a.status_of(draft).await["status"], "draft");

    // Another patient's transaction, or one without a patient, goes through.
    let other = id_of(&a.p.app.create_patient(a.p.branch, "Ben", "Santos").await);
    let lines = json!([{ "pharmacy_item_id": a.item, "quantity": "1" }]);
    for body in [
        json!({ "branch_id": a.p.branch, "patient_id": other, "lines": lines }),
        json!({ "branch_id": a.p.branch, "lines": lines }),
    ] {
        let tx = id_of(&a.p.app.created("/api/v1/transactions", None, body).await);
        assert_status(&a.complete_as(&admin, tx, json!({})).await, 200);
    }
}

#[tokio::test]
async fn an_override_needs_its_permission_and_a_reason_and_is_kept_and_audited() {
    let a = Allergic::open().await;
    let app = &a.p.app;
    let role =
        json!({ "name": "dispenser", "permissions": ["pharmacy.read", "pharmacy.write", "patients.read"] });
    assert_status(&app.post("/api/v1/roles", None, role).await, 201);
    let (_, dispenser) = app.create_user("dispenser1", &["dispenser"], &[a.p.branch]).await;
    let (_, pharmacist) = app.create_user("pharmacist1", &["pharmacist"], &[a.p.branch]).await;
    let draft = a.draft().await;
    let reason = json!({ "override_reason": "Ordered by Dr. Tan after review; monitor pulse." });

    // Without the permission a reason does not help; without a reason the permission does not.
    assert_error(&a.complete_as(&dispenser, draft, reason.clone()).await, 403, "forbidden");
    assert_error(&a.complete_as(&dispenser, draft, json!({})).await, 409, "allergy_conflict");
    assert_error(&a.complete_as(&pharmacist, draft, json!({})).await, 409, "allergy_conflict");
    assert_eq!(a.status_of(draft).await["status"], "draft");

    let r = a.complete_as(&pharmacist, draft, reason).await;
    assert_status(&r, 200);
    assert_eq!(r.body["data"]["status"], "completed");
    let kept = "Ordered by Dr. Tan after review; monitor pulse.";
    assert_eq!(r.body["data"]["allergy_override_reason"], kept);
    let trail = app.audit_rows("/api/v1/system-audit-logs", None, "transactions", draft).await;
    let completed = trail.iter().find(|row| row["action"] == "complete").expect("the completion is audited");
    assert_eq!(completed["before"]["allergy_override_reason"], Value::Null);
    assert_eq!(completed["after"]["allergy_override_reason"], kept);
    assert_eq!(completed["after"]["status"], "completed");
}

#[tokio::test]
async fn an_inactive_or_resolved_allergy_does_not_stop_a_dispense() {
    let a = Allergic::open().await;
    let admin = a.p.app.admin_token.clone();
    let allergy = format!("/api/v1/patients/{}/allergies/{}", a.patient, a.allergy);
    for status in ["inactive", "resolved"] {
        assert_status(&a.p.app.put(&allergy, Some(a.p.branch), json!({ "status": status })).await, 200);
        let draft = a.draft().await;
        let r = a.complete_as(&admin, draft, json!({})).await;
        assert_status(&r, 200);
        assert_eq!(r.body["data"]["allergy_override_reason"], Value::Null);
    }
    // Active again, it stops the next one; deleted, it no longer does.
    assert_status(&a.p.app.put(&allergy, Some(a.p.branch), json!({ "status": "active" })).await, 200);
    let draft = a.draft().await;
    assert_error(&a.complete_as(&admin, draft, json!({})).await, 409, "allergy_conflict");
    assert_status(&a.p.app.delete(&allergy, Some(a.p.branch)).await, 200);
    assert_status(&a.complete_as(&admin, draft, json!({})).await, 200);
}
