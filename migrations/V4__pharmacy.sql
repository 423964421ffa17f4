-- Pharmacy and inventory. Stock is a ledger: every change of a lot's level is a movement row
-- written in the same transaction as the level, the level never goes below zero, and
-- movements are never changed or removed.

CREATE TABLE pharmacy_items (
    id            bigserial PRIMARY KEY,
    medicine_id   bigint REFERENCES medicines,
    code          text NOT NULL,
    name          text NOT NULL,
    unit          text NOT NULL,
    sale_price    numeric(12, 2) NOT NULL CHECK (sale_price >= 0),
    cost_price    numeric(12, 2) NOT NULL DEFAULT 0 CHECK (cost_price >= 0),
    reorder_level numeric(12, 3) NOT NULL DEFAULT 0 CHECK (reorder_level >= 0),
    has_expiry    boolean NOT NULL DEFAULT true,
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
    version       integer NOT NULL DEFAULT 1,
    created_by    bigint,
    updated_by    bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz
);
CREATE UNIQUE INDEX pharmacy_items_code_key ON pharmacy_items (code) WHERE deleted_at IS NULL;

-- A lot of an item at a branch. on_hand is changed by movements only.
CREATE TABLE stock_availables (
    id               bigserial PRIMARY KEY,
    branch_id        bigint NOT NULL REFERENCES branches,
    pharmacy_item_id bigint NOT NULL REFERENCES pharmacy_items,
    lot_no           text NOT NULL,
    expiry_date      date,
    on_hand          numeric(12, 3) NOT NULL DEFAULT 0 CHECK (on_hand >= 0),
    version          integer NOT NULL DEFAULT 1,
    created_by       bigint,
    updated_by       bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE UNIQUE INDEX stock_availables_lot_key ON stock_availables (branch_id, pharmacy_item_id, lot_no)
    WHERE deleted_at IS NULL;
CREATE INDEX stock_availables_item_idx ON stock_availables (branch_id, pharmacy_item_id, expiry_date)
    WHERE deleted_at IS NULL;

CREATE TABLE purchase_orders (
    id            bigserial PRIMARY KEY,
    branch_id     bigint NOT NULL REFERENCES branches,
    number        text NOT NULL UNIQUE,
    supplier_id   bigint NOT NULL REFERENCES suppliers,
    status        text NOT NULL DEFAULT 'draft',
    order_date    date NOT NULL,
    expected_date date,
    notes         text,
    total         numeric(14, 2) NOT NULL DEFAULT 0,
    ordered_at    timestamptz,
    closed_at     timestamptz,
    cancelled_at  timestamptz,
    cancel_reason text,
    version       integer NOT NULL DEFAULT 1,
    created_by    bigint,
    updated_by    bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz
);
CREATE INDEX purchase_orders_branch_idx ON purchase_orders (branch_id, order_date) WHERE deleted_at IS NULL;

CREATE TABLE purchase_order_lines (
    id                bigserial PRIMARY KEY,
    purchase_order_id bigint NOT NULL REFERENCES purchase_orders ON DELETE CASCADE,
    pharmacy_item_id  bigint NOT NULL REFERENCES pharmacy_items,
    quantity_ordered  numeric(12, 3) NOT NULL CHECK (quantity_ordered > 0),
    unit_cost         numeric(12, 2) NOT NULL CHECK (unit_cost >= 0),
    quantity_received numeric(12, 3) NOT NULL DEFAULT 0 CHECK (quantity_received <= quantity_ordered),
    line_total        numeric(14, 2) NOT NULL,
    UNIQUE (purchase_order_id, pharmacy_item_id)
);

CREATE TABLE deliveries (
    id                bigserial PRIMARY KEY,
    branch_id         bigint NOT NULL REFERENCES branches,
    supplier_id       bigint NOT NULL REFERENCES suppliers,
    purchase_order_id bigint REFERENCES purchase_orders,
    invoice_no        text,
    received_at       timestamptz NOT NULL DEFAULT now(),
    status            text NOT NULL DEFAULT 'draft',
    notes             text,
    total             numeric(14, 2) NOT NULL DEFAULT 0,
    posted_at         timestamptz,
    version           integer NOT NULL DEFAULT 1,
    created_by        bigint,
    updated_by        bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    deleted_at        timestamptz
);
CREATE INDEX deliveries_branch_idx ON deliveries (branch_id, received_at) WHERE deleted_at IS NULL;

CREATE TABLE delivery_lines (
    id               bigserial PRIMARY KEY,
    delivery_id      bigint NOT NULL REFERENCES deliveries ON DELETE CASCADE,
    pharmacy_item_id bigint NOT NULL REFERENCES pharmacy_items,
    lot_no           text NOT NULL,
    expiry_date      date,
    quantity         numeric(12, 3) NOT NULL CHECK (quantity > 0),
    unit_cost        numeric(12, 2) NOT NULL CHECK (unit_cost >= 0),
    line_total       numeric(14, 2) NOT NULL
);
CREATE INDEX delivery_lines_delivery_idx ON delivery_lines (delivery_id);

-- Pharmacy transactions (dispensing).
CREATE TABLE transactions (
    id                     bigserial PRIMARY KEY,
    branch_id              bigint NOT NULL REFERENCES branches,
    number                 text NOT NULL UNIQUE,
    -- Rows of the branch's schema, checked by the server on write.
    patient_id             bigint,
    prescribed_medicine_id bigint,
    status                 text NOT NULL DEFAULT 'draft',
    transaction_date       date NOT NULL,
    notes                  text,
    total                  numeric(14, 2) NOT NULL DEFAULT 0,
    completed_at           timestamptz,
    voided_at              timestamptz,
    void_reason            text,
    version                integer NOT NULL DEFAULT 1,
    created_by             bigint,
    updated_by             bigint,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz
);
CREATE INDEX transactions_branch_idx ON transactions (branch_id, transaction_date) WHERE deleted_at IS NULL;

CREATE TABLE transaction_lines (
    id                 bigserial PRIMARY KEY,
    transaction_id     bigint NOT NULL REFERENCES transactions ON DELETE CASCADE,
    pharmacy_item_id   bigint NOT NULL REFERENCES pharmacy_items,
    stock_available_id bigint REFERENCES stock_availables,
    quantity           numeric(12, 3) NOT NULL CHECK (quantity > 0),
    unit_price         numeric(12, 2) NOT NULL CHECK (unit_price >= 0),
    discount           numeric(12, 2) NOT NULL DEFAULT 0 CHECK (discount >= 0),
    line_total         numeric(14, 2) NOT NULL,
    -- [{stock_available_id, quantity}] taken when the transaction was completed.
    allocations        jsonb NOT NULL DEFAULT '[]'
);
CREATE INDEX transaction_lines_transaction_idx ON transaction_lines (transaction_id);

-- The ledger. quantity is signed; quantity_after is the lot's level after it, in posting
-- order. Rows are only ever inserted.
CREATE TABLE stock_movements (
    id                 bigserial PRIMARY KEY,
    branch_id          bigint NOT NULL REFERENCES branches,
    stock_available_id bigint NOT NULL REFERENCES stock_availables,
    pharmacy_item_id   bigint NOT NULL REFERENCES pharmacy_items,
    kind               text NOT NULL,
    quantity           numeric(12, 3) NOT NULL CHECK (quantity <> 0),
    quantity_after     numeric(12, 3) NOT NULL CHECK (quantity_after >= 0),
    reason             text,
    reference          text,
    occurred_at        timestamptz NOT NULL DEFAULT now(),
    delivery_id        bigint REFERENCES deliveries,
    transaction_id     bigint REFERENCES transactions,
    counterpart_id     bigint REFERENCES stock_movements,
    version            integer NOT NULL DEFAULT 1,
    created_by         bigint,
    updated_by         bigint,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    deleted_at         timestamptz,
    CHECK (CASE kind WHEN 'receipt' THEN quantity > 0 WHEN 'return' THEN quantity > 0 WHEN 'transfer_in' THEN quantity > 0
                     WHEN 'adjustment' THEN true ELSE quantity < 0 END)
);
CREATE INDEX stock_movements_lot_idx ON stock_movements (stock_available_id, id);
CREATE INDEX stock_movements_branch_idx ON stock_movements (branch_id, occurred_at);

-- The ledger is append-only, whatever writes to it.
CREATE FUNCTION stock_movements_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.counterpart_id IS DISTINCT FROM OLD.counterpart_id
       AND (NEW.quantity, NEW.quantity_after, NEW.stock_available_id, NEW.kind)
           IS NOT DISTINCT FROM (OLD.quantity, OLD.quantity_after, OLD.stock_available_id, OLD.kind) THEN
        RETURN NEW; -- linking the two halves of a transfer
    END IF;
    RAISE EXCEPTION 'stock movements are never changed or removed' USING ERRCODE = 'integrity_constraint_violation';
END
$$;
CREATE TRIGGER stock_movements_append_only BEFORE UPDATE OR DELETE ON stock_movements
    FOR EACH ROW EXECUTE FUNCTION stock_movements_append_only();
