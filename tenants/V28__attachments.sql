-- Documents and images in a patient's chart. The bytes are kept once per branch by their
-- SHA-256 (`attachment_blobs`); in the branch's own table of chunks when the server keeps
-- them in PostgreSQL, or in an object store beside it (`store_key`), so that reading an
-- attachment's row never reads its bytes.
CREATE TABLE attachment_blobs (
    id          bigserial PRIMARY KEY,
    sha256      text NOT NULL UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    bytes       bigint NOT NULL CHECK (bytes > 0),
    -- Where the bytes are: NULL for `attachment_chunks`, else the object store's key.
    store_key   text,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- A blob's bytes in order, 256 KiB a chunk (the last one shorter).
CREATE TABLE attachment_chunks (
    blob_id  bigint NOT NULL REFERENCES attachment_blobs,
    seq      integer NOT NULL CHECK (seq >= 0),
    data     bytea NOT NULL,
    PRIMARY KEY (blob_id, seq)
);
-- Chunks are written once and read whole; compressing images and PDFs again gains nothing.
ALTER TABLE attachment_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE attachments (
    id                bigserial PRIMARY KEY,
    patient_id        bigint NOT NULL REFERENCES patients,
    visit_id          bigint REFERENCES patient_visits,
    examination_kind  text,
    examination_id    bigint,
    blob_id           bigint NOT NULL REFERENCES attachment_blobs,
    kind              text NOT NULL CHECK (kind IN ('pdf', 'jpeg', 'png', 'tiff', 'dicom')),
    content_type      text NOT NULL,
    bytes             bigint NOT NULL,
    sha256            text NOT NULL,
    filename          text NOT NULL,
    title             text,
    delete_reason     text,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz,
    CHECK ((examination_kind IS NULL) = (examination_id IS NULL)),
    CHECK ((deleted_at IS NULL) = (delete_reason IS NULL))
);
-- Over all rows, deleted ones too: a merge of patients moves them all.
CREATE INDEX attachments_patient_idx ON attachments (patient_id, id);
-- A content is in a patient's chart once.
CREATE UNIQUE INDEX attachments_once_per_patient ON attachments (patient_id, sha256) WHERE deleted_at IS NULL;
CREATE TRIGGER attachments_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON attachments
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();
