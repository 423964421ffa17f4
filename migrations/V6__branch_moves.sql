-- Branches move between database servers, are backed up and restored, and are dropped for
-- good by an operator.

-- While a move makes its last copy, the branch's writes answer 503 (reads go on).
ALTER TABLE branches ADD COLUMN frozen boolean NOT NULL DEFAULT false;

-- A dropped branch keeps its registry row (and its audit trail, below); its schema is gone.
ALTER TABLE branches DROP CONSTRAINT branches_status_check;
ALTER TABLE branches ADD CONSTRAINT branches_status_check
    CHECK (status IN ('provisioning', 'active', 'archived', 'dropped'));

-- Every move of a branch, with how long its writes were frozen.
CREATE TABLE branch_moves (
    id          bigserial PRIMARY KEY,
    branch_id   bigint NOT NULL REFERENCES branches,
    -- Server names only (host, port, database): never credentials.
    from_server text NOT NULL,
    to_server   text NOT NULL,
    state       text NOT NULL DEFAULT 'copying'
                CHECK (state IN ('copying', 'frozen', 'done', 'failed')),
    rows_copied bigint,
    frozen_ms   bigint,
    error       text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX branch_moves_branch_idx ON branch_moves (branch_id, started_at);

-- A schema a branch left behind on its old server (renamed so that nothing can write to it),
-- kept until `branch drop`.
CREATE TABLE retired_schemas (
    id           bigserial PRIMARY KEY,
    branch_id    bigint NOT NULL REFERENCES branches,
    -- NULL: the registry database. Holds credentials: never shown.
    database_url text,
    schema_name  text NOT NULL,
    retired_at   timestamptz NOT NULL DEFAULT now(),
    dropped_at   timestamptz
);
CREATE INDEX retired_schemas_branch_idx ON retired_schemas (branch_id);

-- The audit trail of a dropped branch, kept in the registry.
CREATE TABLE dropped_branch_audit_log (
    branch_id  bigint NOT NULL REFERENCES branches,
    id         bigint NOT NULL,
    at         timestamptz NOT NULL,
    user_id    bigint,
    action     text NOT NULL,
    resource   text NOT NULL,
    record_id  bigint,
    before     jsonb,
    after      jsonb,
    PRIMARY KEY (branch_id, id)
);
