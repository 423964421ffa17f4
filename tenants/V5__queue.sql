-- The service queue: tickets per branch service and local day, numbered from a counter row
-- bumped in the creating transaction (unique under concurrency, restarting daily).
CREATE TABLE queue_counters (
    branch_service_id bigint NOT NULL,
    queue_date        date NOT NULL,
    last              integer NOT NULL,
    PRIMARY KEY (branch_service_id, queue_date)
);

CREATE TABLE queue_tickets (
    id                  bigserial PRIMARY KEY,
    number              text NOT NULL,
    -- The ticket's place in its day (the counter's value).
    position            integer NOT NULL,
    -- A registry branch service of this branch, checked by the server on write.
    branch_service_id   bigint NOT NULL,
    patient_id          bigint REFERENCES patients,
    patient_visit_id    bigint REFERENCES patient_visits,
    priority            text NOT NULL DEFAULT 'normal' CHECK (priority IN ('normal', 'priority', 'urgent')),
    status              text NOT NULL DEFAULT 'waiting',
    counter             text,
    call_count          integer NOT NULL DEFAULT 0,
    queue_date          date NOT NULL,
    called_at           timestamptz,
    serving_at          timestamptz,
    completed_at        timestamptz,
    transferred_from_id bigint REFERENCES queue_tickets,
    transferred_to_id   bigint REFERENCES queue_tickets,
    version             integer NOT NULL DEFAULT 1,
    created_by          bigint,
    updated_by          bigint,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    deleted_at          timestamptz,
    UNIQUE (branch_service_id, queue_date, position)
);
CREATE INDEX queue_tickets_open_idx ON queue_tickets (queue_date) WHERE status IN ('waiting', 'called');
CREATE INDEX queue_tickets_day_idx ON queue_tickets (queue_date, branch_service_id);
