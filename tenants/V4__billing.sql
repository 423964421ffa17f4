-- Server-made document numbers: a counter per series and local year, bumped in the
-- transaction that creates the document (unique under concurrency, gapless).
CREATE TABLE document_counters (
    series text NOT NULL,
    year   integer NOT NULL,
    last   bigint NOT NULL,
    PRIMARY KEY (series, year)
);

-- Answers kept for Idempotency-Key replays of POSTs on branch resources (24 hours).
CREATE TABLE idempotency_keys (
    user_id     bigint NOT NULL,
    path        text NOT NULL,
    key         text NOT NULL,
    fingerprint bytea NOT NULL,
    status      integer,
    response    jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path, key)
);

-- A patient's charges, discounts, payments and refunds. Money is NUMERIC(12,2). Posted rows
-- never change; a void keeps the row.
CREATE TABLE billing_transactions (
    id                bigserial PRIMARY KEY,
    number            text NOT NULL UNIQUE,
    patient_id        bigint NOT NULL REFERENCES patients,
    kind              text NOT NULL CHECK (kind IN ('charge', 'discount', 'payment', 'refund')),
    status            text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'posted', 'voided')),
    description       text,
    -- Registry rows (master data), checked by the server on write.
    bill_item_id      bigint,
    procedure_id      bigint,
    service_id        bigint,
    quantity          numeric(12, 3) CHECK (quantity > 0),
    unit_price        numeric(12, 2) CHECK (unit_price >= 0),
    amount            numeric(12, 2) NOT NULL CHECK (amount > 0),
    payment_method_id bigint,
    reference         text,
    patient_visit_id  bigint REFERENCES patient_visits,
    insurance_id      bigint,
    covered_amount    numeric(12, 2) CHECK (covered_amount >= 0 AND covered_amount <= amount),
    transaction_date  date NOT NULL,
    posted_at         timestamptz,
    voided_at         timestamptz,
    void_reason       text,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz
);
CREATE INDEX billing_transactions_patient_idx ON billing_transactions (patient_id, transaction_date)
    WHERE deleted_at IS NULL;
CREATE INDEX billing_transactions_date_idx ON billing_transactions (transaction_date, id) WHERE deleted_at IS NULL;
