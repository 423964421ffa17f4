-- The registry: who may log in, what they may do, which branches exist and where their
-- schemas live. Branch data itself lives in the branch schemas (see tenants/).

CREATE TABLE permissions (
    name        text PRIMARY KEY,
    description text NOT NULL
);

CREATE TABLE roles (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL,
    description text,
    version     integer NOT NULL DEFAULT 1,
    created_by  bigint,
    updated_by  bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
CREATE UNIQUE INDEX roles_name_key ON roles (lower(name));

CREATE TABLE role_permissions (
    role_id    bigint NOT NULL REFERENCES roles ON DELETE CASCADE,
    permission text   NOT NULL REFERENCES permissions ON UPDATE CASCADE ON DELETE CASCADE,
    PRIMARY KEY (role_id, permission)
);

CREATE TABLE branches (
    id              bigserial PRIMARY KEY,
    code            text NOT NULL UNIQUE CHECK (code ~ '^[A-Z0-9]{2,10}$'),
    name            text NOT NULL,
    -- Made by the server from the id, never taken from a request.
    schema_name     text GENERATED ALWAYS AS ('branch_' || id) STORED,
    -- NULL: the schema lives in the registry database. Holds credentials: never returned.
    database_url    text,
    status          text NOT NULL DEFAULT 'provisioning'
                    CHECK (status IN ('provisioning', 'active', 'archived')),
    schema_version  integer,
    migration_state text NOT NULL DEFAULT 'pending'
                    CHECK (migration_state IN ('pending', 'current', 'failed')),
    migration_error text,
    migrated_at     timestamptz,
    version         integer NOT NULL DEFAULT 1,
    created_by      bigint,
    updated_by      bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz
);

CREATE TABLE users (
    id                bigserial PRIMARY KEY,
    name              text NOT NULL,
    email             text NOT NULL,
    username          text NOT NULL,
    -- '!' matches no password: a user created without one cannot log in.
    password_hash     text NOT NULL DEFAULT '!',
    active            boolean NOT NULL DEFAULT true,
    default_branch_id bigint REFERENCES branches ON DELETE SET NULL,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz
);
CREATE UNIQUE INDEX users_username_key ON users (lower(username));
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE user_roles (
    user_id bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    role_id bigint NOT NULL REFERENCES roles ON DELETE RESTRICT,
    PRIMARY KEY (user_id, role_id)
);
CREATE INDEX user_roles_role_idx ON user_roles (role_id);

CREATE TABLE branch_users (
    branch_id  bigint NOT NULL REFERENCES branches ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (branch_id, user_id)
);
CREATE INDEX branch_users_user_idx ON branch_users (user_id);

-- Counters of a branch where patients queue (reception, refraction, cashier, ...).
CREATE TABLE branch_services (
    id          bigserial PRIMARY KEY,
    branch_id   bigint NOT NULL REFERENCES branches,
    name        text NOT NULL,
    -- Prefix of the queue tickets of this service (R-001).
    code        text NOT NULL,
    description text,
    active      boolean NOT NULL DEFAULT true,
    version     integer NOT NULL DEFAULT 1,
    created_by  bigint,
    updated_by  bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
CREATE UNIQUE INDEX branch_services_code_key ON branch_services (branch_id, code) WHERE deleted_at IS NULL;

-- Staff who serve at a branch service.
CREATE TABLE branch_service_staff (
    service_id bigint NOT NULL REFERENCES branch_services ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (service_id, user_id)
);

-- Bearer tokens: `<id>|<secret>`; only SHA-256(secret) is kept.
CREATE TABLE api_tokens (
    id           bigserial PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    secret_hash  bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id);

-- One live reset code per user; a new one replaces the old.
CREATE TABLE password_reset_codes (
    user_id    bigint PRIMARY KEY REFERENCES users ON DELETE CASCADE,
    code_hash  bytea NOT NULL,
    attempts   integer NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Every tenant migration run, successful or not, for operators.
CREATE TABLE branch_migrations (
    id         bigserial PRIMARY KEY,
    branch_id  bigint NOT NULL REFERENCES branches ON DELETE CASCADE,
    version    integer,
    state      text NOT NULL CHECK (state IN ('current', 'failed')),
    error      text,
    applied    integer NOT NULL DEFAULT 0,
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX branch_migrations_branch_idx ON branch_migrations (branch_id, at DESC);

-- Changes to registry-held records (master data, pharmacy, administration).
CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    user_id    bigint,
    action     text NOT NULL,
    resource   text NOT NULL,
    record_id  bigint,
    before     jsonb,
    after      jsonb
);
CREATE INDEX audit_log_record_idx ON audit_log (resource, record_id, at);
