//! Each examination type's own rules: ranges, steps and rules between fields, with dotted
//! error paths.
//!
//! The helpers shared by the topics are here; the tests are in the modules below, one topic each.

use super::*;

mod eye_structures;
mod orbit_and_adnexa;
mod vision;

/// `(eye sent as the right eye, the fields a 422 names)` for one examination.
async fn refuses(clinic: &Clinic, exam: &str, cases: &[(Value, &[&str])]) {
    for (eye, fields) in cases {
        let r = with_right_eye(clinic, exam, eye.clone(), json!({})).await;
        assert_status(&r, 422);
        assert_invalid(&r, fields);
    }
}

/// Each eye is created and its `field` answered as the JSON text `expected` (numbers
/// compare with their scale: `-2.50` is not `-2.5`).
async fn accepts(clinic: &Clinic, exam: &str, cases: &[(Value, &str, &str)]) {
    for (eye, field, expected) in cases {
        let r = with_right_eye(clinic, exam, eye.clone(), json!({})).await;
        assert_status(&r, 201);
        let got = &r.body["data"]["right_eye"][*field];
        assert_eq!(got, &parsed(expected), "{exam} {eye}: {field} answered {got}");
    }
}
