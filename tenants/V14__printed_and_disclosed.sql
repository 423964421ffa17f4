-- A medical certificate is a draft until a doctor signs it, like an examination; printed
-- unsigned, it carries a DRAFT mark. Certificates made before this were never signed.
ALTER TABLE medical_certificates
    ADD COLUMN status text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'signed')),
    ADD COLUMN signed_by bigint,
    ADD COLUMN signed_at timestamptz;

-- The route a record of the audit log came through (`GET /api/v1/patients/{id}`); none for
-- records written before it was kept, and for work no request did (the day closer).
ALTER TABLE audit_log ADD COLUMN route text;

-- A patient's access log reads the audit log three ways: records of the patient itself (by
-- `audit_log_record_idx`), records of rows that name the patient (visits, examinations,
-- billing, certificates, printed documents), and reads of many patients that showed this
-- one (lists, searches, the type-ahead, and the chunks of exports: `exported`), which keep the
-- ids they showed.
CREATE INDEX audit_log_patient_idx ON audit_log ((coalesce(after, before) ->> 'patient_id'), at);
CREATE INDEX audit_log_shown_idx ON audit_log USING gin ((after -> 'ids') jsonb_path_ops)
    WHERE resource = 'patients' AND action IN ('list', 'search', 'exported');
