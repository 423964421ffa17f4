//! Every index of a branch schema is read by a query the server runs, or backs a constraint
//! (a primary key, a unique index, an exclusion). Each index that does neither is named
//! here with one of its readers' queries; the test fails on an index missing from the list
//! (nobody says who reads it), on a listed one gone from the schema, and on one its query
//! does not read. Each query is explained with PostgreSQL made to prefer any index
//! (`enable_seqscan = off`) and with the table's other plain indexes dropped in a rolled-back
//! transaction: on empty tables every usable index costs the same, so only then does the
//! plan say whether this one serves the query.

use crate::support::TestApp;

struct Reader {
    index: &'static str,
    /// Where the server runs the query, briefly.
    by: &'static str,
    sql: &'static str,
}

const READERS: &[Reader] = &[
    Reader {
        index: "allergies_patient_idx",
        by: "a patient's active allergies to what is dispensed (pharmacy/allergies.rs); the nested list; merges",
        sql: "SELECT id, medicine_id, severity, reaction FROM allergies WHERE patient_id = 7 AND medicine_id = ANY('{1,2}'::bigint[]) AND status = 'active' AND deleted_at IS NULL ORDER BY id",
    },
    Reader {
        index: "appointment_reminders_due_idx",
        by: "the reminder worker's due reminders (appointments/reminders.rs)",
        sql: "SELECT r.id FROM appointment_reminders r WHERE r.status = 'pending' AND r.next_attempt_at <= now() ORDER BY r.next_attempt_at, r.id LIMIT 50 FOR UPDATE OF r SKIP LOCKED",
    },
    Reader {
        index: "appointments_doctor_starts_idx",
        by: "a doctor's calendar feed and free slots (appointments/feed.rs, availability.rs)",
        sql: "SELECT a.id FROM appointments a WHERE a.doctor_id = 3 AND a.deleted_at IS NULL AND a.starts_at >= now() - interval '30 days' AND a.starts_at < now() + interval '180 days' ORDER BY a.starts_at, a.id LIMIT 500",
    },
    Reader {
        index: "appointments_patient_idx",
        by: "a merge's rows of the duplicate, deleted ones too (resource/store/moving.rs)",
        sql: "SELECT t.id FROM appointments t WHERE t.patient_id = 7 ORDER BY t.id FOR UPDATE OF t",
    },
    Reader {
        index: "appointments_starts_idx",
        by: "the appointments of some days (appointments/booking.rs, dashboard)",
        sql: "SELECT a.id FROM appointments a WHERE a.deleted_at IS NULL AND a.starts_at >= ('2026-03-01'::date::timestamp AT TIME ZONE 'Asia/Manila') AND a.starts_at < (('2026-03-07'::date + 1)::timestamp AT TIME ZONE 'Asia/Manila') ORDER BY a.starts_at, a.id",
    },
    Reader {
        index: "attachments_patient_idx",
        by: "a merge's rows of the duplicate, deleted ones too (resource/store/moving.rs)",
        sql: "SELECT t.id FROM attachments t WHERE t.patient_id = 7 ORDER BY t.id FOR UPDATE OF t",
    },
    Reader {
        index: "audit_log_chain_idx",
        by: "the chain's verification, lane by lane (tenancy/audit_chain.rs)",
        sql: "SELECT chain_lane, chain_position, id FROM audit_log WHERE (chain_lane, chain_position, id) > (1, 10, 100) ORDER BY chain_lane, chain_position, id LIMIT 1000",
    },
    Reader {
        index: "audit_log_patient_idx",
        by: "a patient's access log: rows naming the patient (clinical/access_log.rs)",
        sql: "SELECT a.id FROM audit_log a WHERE (coalesce(a.after, a.before) ->> 'patient_id') = '7' ORDER BY a.at DESC",
    },
    Reader {
        index: "audit_log_record_idx",
        by: "a record's history, the receipt's poster (billing/receipt.rs)",
        sql: "SELECT user_id FROM audit_log WHERE resource = 'patients/{patient_id}/billing-transactions' AND record_id = 9 AND user_id IS NOT NULL AND (action = 'post' OR (action = 'create' AND after->>'status' = 'posted')) ORDER BY at DESC, id DESC LIMIT 1",
    },
    Reader {
        index: "audit_log_shown_idx",
        by: "a patient's access log: the lists that showed the patient (clinical/access_log.rs)",
        sql: "SELECT a.id FROM audit_log a WHERE a.resource = 'patients' AND a.action IN ('list', 'search', 'exported') AND (a.after -> 'ids') @> '[7]'::jsonb",
    },
    Reader {
        index: "audit_log_user_idx",
        by: "the audit list of one user (filters[user_id])",
        sql: "SELECT t.id FROM audit_log t WHERE t.user_id = 3 ORDER BY t.at DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "billing_transactions_date_idx",
        by: "FHIR ChargeItem by date (fhir/charge.rs)",
        sql: "SELECT b.id FROM billing_transactions b WHERE b.deleted_at IS NULL AND b.kind = 'charge' AND b.status = 'posted' AND (b.transaction_date >= '2026-01-01'::date AND b.transaction_date < '2026-02-01'::date)",
    },
    Reader {
        index: "billing_transactions_patient_idx",
        by: "a patient's bills in date order (billing/mod.rs); merges",
        sql: "SELECT t.id FROM billing_transactions t WHERE t.deleted_at IS NULL AND t.patient_id = 7 ORDER BY t.transaction_date DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "complaints_patient_idx",
        by: "filters[patient_id]; merges",
        sql: "SELECT t.id FROM complaints t WHERE t.deleted_at IS NULL AND t.patient_id = 7::bigint ORDER BY t.created_at DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "complaints_visit_idx",
        by: "a visit's summary (clinical/summary.rs)",
        sql: "SELECT t.id FROM complaints t WHERE t.patient_visit_id = 11 AND t.deleted_at IS NULL",
    },
    Reader {
        index: "medical_certificates_patient_idx",
        by: "filters[patient_id]; merges",
        sql: "SELECT t.id FROM medical_certificates t WHERE t.deleted_at IS NULL AND t.patient_id = 7::bigint ORDER BY t.issued_on DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "medical_certificates_visit_idx",
        by: "a visit's summary (clinical/summary.rs)",
        sql: "SELECT t.id FROM medical_certificates t WHERE t.patient_visit_id = 11 AND t.deleted_at IS NULL",
    },
    Reader {
        index: "patient_visit_plans_patient_idx",
        by: "filters[patient_id]; merges",
        sql: "SELECT t.id FROM patient_visit_plans t WHERE t.deleted_at IS NULL AND t.patient_id = 7::bigint ORDER BY t.created_at DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "patient_visit_plans_visit_idx",
        by: "a visit's summary (clinical/summary.rs)",
        sql: "SELECT t.id FROM patient_visit_plans t WHERE t.patient_visit_id = 11 AND t.deleted_at IS NULL",
    },
    Reader {
        index: "prescribed_medicines_patient_idx",
        by: "filters[patient_id]; merges",
        sql: "SELECT t.id FROM patient_visit_prescribed_medicines t WHERE t.deleted_at IS NULL AND t.patient_id = 7::bigint ORDER BY t.created_at DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "prescribed_medicines_visit_idx",
        by: "a visit's summary (clinical/summary.rs)",
        sql: "SELECT t.id FROM patient_visit_prescribed_medicines t WHERE t.patient_visit_id = 11 AND t.deleted_at IS NULL",
    },
    Reader {
        index: "patient_duplicate_pairs_newer_idx",
        by: "the likely duplicates, newest first (clinical/merge/duplicates.rs)",
        sql: "SELECT p.* FROM patient_duplicate_pairs p ORDER BY p.newer_id DESC, p.older_id DESC LIMIT 20 OFFSET 0",
    },
    Reader {
        index: "patient_merge_rows_row_idx",
        by: "following a moved row's versions (clinical/merge/log.rs)",
        sql: "UPDATE patient_merge_rows r SET version = m.version FROM unnest('{1,2}'::bigint[], '{2,2}'::int[]) AS m (row_id, version), patient_merges pm WHERE r.place = 'branch' AND r.table_name = 'refractions' AND r.row_id = m.row_id AND r.version = m.version - 1 AND r.merge_id <> 3 AND pm.id = r.merge_id AND pm.state <> 'undone'",
    },
    Reader {
        index: "patient_merges_survivor_idx",
        by: "a survivor's merges in progress (clinical/merge/merging.rs)",
        sql: "SELECT id FROM patient_merges WHERE survivor_id = ANY('{7,5}'::bigint[]) AND state IN ('registry_pending', 'undoing') ORDER BY id LIMIT 1",
    },
    Reader {
        index: "patient_search_prefixes_idx",
        by: "the type-ahead (clinical/patients.rs)",
        sql: "SELECT s.id FROM patient_search s WHERE patient_prefixes(s.first_name, s.middle_name, s.last_name, s.suffix, s.pin) @@ 'dela & cruz'::tsquery ORDER BY s.last_name, s.first_name, s.id LIMIT 10",
    },
    Reader {
        index: "patient_search_text_idx",
        by: "a patient search on its own (resource/store/select.rs)",
        sql: "SELECT t.id FROM patient_search t WHERE t.search_text LIKE '%cruz%'",
    },
    Reader {
        index: "patient_visits_date_idx",
        by: "the visits of a day (filters[visit_date], FHIR Encounter date)",
        sql: "SELECT v.id FROM patient_visits v WHERE v.deleted_at IS NULL AND (v.visit_date >= '2026-01-01'::date AND v.visit_date < '2026-01-02'::date)",
    },
    Reader {
        index: "patient_visits_patient_idx",
        by: "a patient's visits in date order; merges",
        sql: "SELECT t.id FROM patient_visits t WHERE t.deleted_at IS NULL AND t.patient_id = 7::bigint ORDER BY t.visit_date DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "patients_birth_date_idx",
        by: "the dashboard's ages of new patients (dashboard/demographics.rs); sort=birth_date",
        sql: "SELECT count(*) FROM patients p WHERE p.deleted_at IS NULL AND p.birth_date >= '1980-01-01' AND p.birth_date < '1981-01-01' AND p.created_at >= '2026-01-01'::timestamptz AND p.created_at < '2026-02-01'::timestamptz",
    },
    Reader {
        index: "patients_sex_idx",
        by: "the count of a list filtered by sex (resource/store/select.rs)",
        sql: "SELECT count(*) FROM patients t WHERE t.deleted_at IS NULL AND t.sex = 'female'::text",
    },
    Reader {
        index: "patients_status_idx",
        by: "the count of a list filtered by status (resource/store/select.rs)",
        sql: "SELECT count(*) FROM patients t WHERE t.deleted_at IS NULL AND t.status = 'active'::text",
    },
    Reader {
        index: "patients_civil_status_idx",
        by: "the count of a list filtered by civil status (resource/store/select.rs)",
        sql: "SELECT count(*) FROM patients t WHERE t.deleted_at IS NULL AND t.civil_status = 'married'::text",
    },
    Reader {
        index: "patients_created_idx",
        by: "sort=created_at",
        sql: "SELECT t.id FROM patients t WHERE t.deleted_at IS NULL ORDER BY t.created_at DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "patients_first_name_idx",
        by: "sort=first_name",
        sql: "SELECT t.id FROM patients t WHERE t.deleted_at IS NULL ORDER BY t.first_name ASC, t.id ASC LIMIT 20",
    },
    Reader {
        index: "patients_last_name_idx",
        by: "the patient list's default order",
        sql: "SELECT t.id FROM patients t WHERE t.deleted_at IS NULL ORDER BY t.last_name ASC, t.id ASC LIMIT 20",
    },
    Reader {
        index: "patients_duplicate_name_idx",
        by: "pairing likely duplicates by name and birth date (tenants/V20)",
        sql: "SELECT p.id FROM unnest('{a|b}'::text[], '{1980-01-01}'::date[]) k (name_key, birth_date) JOIN patients p ON p.duplicate_name = k.name_key AND p.birth_date = k.birth_date AND p.deleted_at IS NULL",
    },
    Reader {
        index: "patients_duplicate_phone_idx",
        by: "pairing likely duplicates by phone (tenants/V20)",
        sql: "SELECT p.id FROM unnest('{9171234567}'::text[]) k (phone_key) JOIN patients p ON p.duplicate_phone = k.phone_key AND p.deleted_at IS NULL",
    },
    Reader {
        index: "patients_duplicate_member_idx",
        by: "pairing likely duplicates by insurance member (tenants/V20)",
        sql: "SELECT p.id FROM unnest('{3:AB12}'::text[]) k (member_key) JOIN patients p ON p.duplicate_member = k.member_key AND p.deleted_at IS NULL",
    },
    Reader {
        index: "patients_merged_into_idx",
        by: "FHIR Patient's replaced-by links (fhir/patient.rs)",
        sql: "SELECT merged_into_id, array_agg(id ORDER BY id) FROM patients WHERE merged_into_id = ANY('{7,8}'::bigint[]) GROUP BY merged_into_id",
    },
    Reader {
        index: "patients_phone_idx",
        by: "the lookup by phone (clinical/patients.rs)",
        sql: "SELECT p.id FROM patients p WHERE p.deleted_at IS NULL AND p.phone_digits LIKE '%917123%' ORDER BY p.last_name, p.first_name, p.id LIMIT 10",
    },
    Reader {
        index: "patients_search_idx",
        by: "FHIR Patient name searches, merged patients too (fhir/names.rs); a search with filters",
        sql: "SELECT p.id FROM patients p WHERE (p.deleted_at IS NULL OR p.merged_into_id IS NOT NULL) AND p.search_text LIKE ANY ('{%cruz%}'::text[])",
    },
    Reader {
        index: "problems_patient_idx",
        by: "a patient's problem of a code (clinical/diagnoses.rs); merges",
        sql: "SELECT 1 FROM problems p WHERE p.patient_id = 7 AND p.code = 'H40.1' AND p.deleted_at IS NULL",
    },
    Reader {
        index: "queue_tickets_open_idx",
        by: "closing the day's open tickets (resource/day_close.rs)",
        sql: "UPDATE queue_tickets SET status = 'no_show', version = version + 1, updated_at = now() WHERE status = ANY('{waiting,called}'::text[]) AND deleted_at IS NULL AND queue_date < '2026-03-02'::date",
    },
    Reader {
        index: "queue_tickets_patient_all_idx",
        by: "a merge's rows of the duplicate, deleted ones too",
        sql: "SELECT t.id FROM queue_tickets t WHERE t.patient_id = 7 ORDER BY t.id FOR UPDATE OF t",
    },
    Reader {
        index: "recalls_due_idx",
        by: "recalls due, in order (appointments/recalls.rs)",
        sql: "SELECT t.id FROM recalls t WHERE t.deleted_at IS NULL AND t.due_on >= '2026-03-01'::date ORDER BY t.due_on ASC, t.id ASC LIMIT 20",
    },
    Reader {
        index: "recalls_patient_idx",
        by: "a patient's recalls; merges",
        sql: "SELECT t.id FROM recalls t WHERE t.deleted_at IS NULL AND t.patient_id = 7::bigint ORDER BY t.due_on ASC, t.id ASC LIMIT 20",
    },
    Reader {
        index: "visit_diagnoses_patient_idx",
        by: "a merge's rows of the duplicate; FHIR Condition",
        sql: "SELECT t.id FROM visit_diagnoses t WHERE t.patient_id = 7 ORDER BY t.id FOR UPDATE OF t",
    },
    Reader {
        index: "visit_diagnoses_visit_idx",
        by: "undoing a merge: rows naming moved visits, deleted ones too (clinical/merge/undoing.rs)",
        sql: "SELECT id FROM visit_diagnoses WHERE patient_visit_id = ANY('{11,12}'::bigint[]) AND NOT (id = ANY('{}'::bigint[])) ORDER BY id",
    },
];

/// The indexes of the examinations' one table, each read for every examination (`{exam}`, as
/// the store picks its rows: `resource::Resource::own_rows`).
const EXAMINATION_READERS: &[Reader] = &[
    Reader {
        index: "examinations_examined_idx",
        by: "the list's default order and its date range; FHIR dates",
        sql: "SELECT t.id FROM examinations t WHERE t.exam = '{exam}' AND t.deleted_at IS NULL AND t.examined_at >= '2026-01-01'::timestamptz AND t.examined_at < '2026-02-01'::timestamptz ORDER BY t.examined_at DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "examinations_patient_idx",
        by: "a patient's examinations in date order; merges",
        sql: "SELECT t.id FROM examinations t WHERE t.exam = '{exam}' AND t.deleted_at IS NULL AND t.patient_id = 7 ORDER BY t.examined_at DESC, t.id DESC LIMIT 20",
    },
    Reader {
        index: "examinations_visit_idx",
        by: "undoing a merge: rows naming moved visits, deleted ones too; a visit's summary",
        sql: "SELECT id FROM examinations WHERE patient_visit_id = ANY('{11,12}'::bigint[]) AND NOT (id = ANY('{}'::bigint[])) AND exam = '{exam}' ORDER BY id",
    },
];

/// `(index, its table, the names of it and its partitions' copies)` of every index of
/// `schema` that backs no constraint and is not unique, partitions' copies aside.
async fn plain_indexes(client: &tokio_postgres::Client, schema: &str) -> Vec<(String, String, Vec<String>)> {
    client
        .query(
            "SELECT c.relname::text, t.relname::text,
                    array_prepend(c.relname::text,
                                  ARRAY(SELECT k.relname::text FROM pg_inherits h JOIN pg_class k ON k.oid = h.inhrelid
                                         WHERE h.inhparent = c.oid))
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
              WHERE c.relnamespace = $1::text::regnamespace AND NOT i.indisunique
                AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = c.oid)
                AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = c.oid)
              ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test]
async fn every_index_of_a_branch_is_read_by_a_query_the_server_runs() {
    let app = TestApp::spawn().await;
    let schema = format!("branch_{}", app.main_branch().await);
    let mut client = clinic_server::db::connect(&app.db.url).await.unwrap();
    let indexes = plain_indexes(&client, &schema).await;
    let mut readers: Vec<(String, &str, String)> =
        READERS.iter().map(|r| (r.index.to_owned(), r.by, r.sql.to_owned())).collect();
    for exam in clinic_server::exams::types::RESOURCES {
        for r in EXAMINATION_READERS {
            readers.push((
                r.index.to_owned(),
                r.by,
                r.sql.replace("{exam}", clinic_server::exams::types::kind_of(exam)),
            ));
        }
    }

    let unread: Vec<&str> = indexes
        .iter()
        .map(|(name, ..)| name.as_str())
        .filter(|name| !readers.iter().any(|(index, ..)| index == name))
        .collect();
    assert!(unread.is_empty(), "indexes no query is listed as reading: {unread:?}");
    let gone: Vec<&str> = readers
        .iter()
        .map(|(index, ..)| index.as_str())
        .filter(|index| !indexes.iter().any(|(name, ..)| name == index))
        .collect();
    assert!(gone.is_empty(), "listed indexes the schema does not have: {gone:?}");

    let mut not_read = Vec::new();
    for (index, by, sql) in &readers {
        let (_, table, names) = indexes.iter().find(|(name, ..)| name == index).unwrap();
        let others: Vec<String> = indexes
            .iter()
            .filter(|(name, on, _)| on == table && name != index)
            .map(|(name, ..)| format!("DROP INDEX {schema}.{name};"))
            .collect();
        let tx = client.transaction().await.unwrap();
        tx.batch_execute(&format!(
            "SET LOCAL search_path TO {schema}, public; SET LOCAL enable_seqscan = off; {}",
            others.concat()
        ))
        .await
        .unwrap();
        let plan: String = tx
            .query(&format!("EXPLAIN (COSTS OFF) {sql}"), &[])
            .await
            .unwrap_or_else(|e| panic!("{index}: {sql}: {e}"))
            .iter()
            .map(|r| r.get::<_, String>(0) + "\n")
            .collect();
        tx.rollback().await.unwrap();
        if !names
            .iter()
            .any(|name| plan.contains(&format!(" {name} ")) || plan.contains(&format!(" {name}\n")))
        {
            not_read.push(format!("{index} ({by}):\n{plan}"));
        }
    }
    assert!(not_read.is_empty(), "indexes their query does not read:\n{}", not_read.join("\n"));
}
