//! What a document prints, it prints whole: names in every script the fonts cover come back
//! from `pdftotext` in their logical order, and a diagnosis at the edge of its length flows
//! onto as many pages as it needs, every word of it, each page with its footer and number.

use serde_json::{Value, json};

use crate::support::printed::{self, pdf_of, squashed};
use crate::support::{TestApp, id_of};

/// Given and family names in the scripts names are written in.
const NAMES: [(&str, &str); 12] = [
    ("Nguyễn Thị", "Peña"),
    ("Αλέξανδρος", "Παπαδόπουλος"),
    ("Иван", "Сидоров"),
    ("محمد", "عبد الله"),
    ("שרה", "כהן"),
    ("अर्जुन", "शर्मा"),
    ("สมชาย", "ใจดี"),
    ("小明", "王"),
    ("さくら", "山田"),
    ("민준", "김"),
    ("Ana ☕", "Cruz 😀"),
    ("Layla", "حسن"),
];

/// A certificate for a new patient named `first last`, with `diagnosis`; its path.
async fn certificate(app: &TestApp, branch: i64, (first, last): (&str, &str), diagnosis: &str) -> String {
    let body = json!({ "first_name": first, "last_name": last, "birth_date": "1984-07-09", "sex": "female" });
    let patient = app.created("/api/v1/patients", Some(branch), body).await;
    let visit = json!({ "patient_id": id_of(&patient), "visit_date": "2026-01-05" });
    let visit = id_of(&app.created("/api/v1/patient-visits", Some(branch), visit).await);
    let sent = json!({ "patient_visit_id": visit, "issued_on": "2026-01-06", "diagnosis": diagnosis });
    let certificate: Value = app.created("/api/v1/medical-certificates", Some(branch), sent).await;
    format!("/api/v1/medical-certificates/{}", id_of(&certificate))
}

#[tokio::test]
async fn names_in_every_script_print_in_their_logical_order() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    let mixed: Vec<String> = NAMES.iter().map(|(first, last)| format!("{first} {last}")).collect();
    let mut pdfs = Vec::new();
    for name in NAMES {
        let path = certificate(&app, branch, name, &format!("Seen with {} {}.", name.0, name.1)).await;
        pdfs.push((name, pdf_of(&app, &app.admin_token, &path, branch).await));
    }
    for ((first, last), pdf) in &pdfs {
        let text = printed::text(pdf);
        let name = format!("{first} {last}");
        // Each name whole, its words and letters in the order they were written.
        for shown in
            [format!("Patient {name}"), format!("that {name} was seen"), format!("Seen with {name}.")]
        {
            assert!(squashed(&text).contains(&squashed(&shown)), "{shown:?} is not in:\n{text}");
        }
        assert!(!text.contains('\u{FFFD}'), "{name}: {text}");
    }
    // One document with every script at once, a name a line, on pages that are looked at.
    let path = certificate(&app, branch, ("Layla", "حسن"), &mixed.join("\n")).await;
    let pdf = pdf_of(&app, &app.admin_token, &path, branch).await;
    let text = printed::text(&pdf);
    for name in &mixed {
        assert!(squashed(&text).contains(&squashed(name)), "{name:?} is not in:\n{text}");
    }
    assert_eq!(printed::render_pages(&pdf, "every-script"), 1);
}

#[tokio::test]
async fn a_diagnosis_at_its_longest_prints_every_word_on_pages_that_each_have_a_footer() {
    let app = TestApp::spawn().await;
    let branch = app.main_branch().await;
    // 1,111 words of 8 characters and one of 9: 9,999 characters, under the limit of 10,000.
    let mut words: Vec<String> = (0..1111).map(|i| format!("dx{i:04}ab")).collect();
    words[1110].push('z');
    let diagnosis = words.join(" ");
    assert_eq!(diagnosis.chars().count(), 9_999);
    let path = certificate(&app, branch, ("Nguyễn Thị", "Peña"), &diagnosis).await;
    let pdf = pdf_of(&app, &app.admin_token, &path, branch).await;
    let text = printed::text(&pdf);
    let printed_words: Vec<&str> = text.split_whitespace().collect();
    let missing: Vec<&String> = words.iter().filter(|w| !printed_words.contains(&w.as_str())).collect();
    assert!(missing.is_empty(), "{} of {} words are not printed: {missing:?}", missing.len(), words.len());
    // In order, one after the other (the footers and running heads between pages aside).
    let in_order: Vec<&str> = printed_words.iter().copied().filter(|w| w.starts_with("dx")).collect();
    assert_eq!(in_order, words.iter().map(String::as_str).collect::<Vec<_>>());

    // pdftotext ends every page with a form feed.
    let pages: Vec<&str> = text.split('\u{c}').filter(|p| !p.trim().is_empty()).collect();
    let count = pages.len();
    assert!(count >= 3, "{count} pages:\n{text}");
    for (i, page) in pages.iter().enumerate() {
        assert!(page.contains(&format!("Page {} of {count}", i + 1)), "page {}:\n{page}", i + 1);
        assert!(squashed(page).contains("byAdministrator"), "page {} has no footer:\n{page}", i + 1);
    }
    assert_eq!(printed::render_pages(&pdf, "long-diagnosis"), count);
}
