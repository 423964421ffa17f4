-- The dashboards count visits by local date and status over ranges of days.
CREATE INDEX patient_visits_date_idx ON patient_visits (visit_date, status) WHERE deleted_at IS NULL;

-- What every patient of the branch owes now, summed: charges and refunds less discounts and
-- payments, over posted rows. Kept by statement-level triggers, like row_counts, so the
-- dashboard reads one row instead of the whole ledger. Only posting, voiding and deleting
-- posted rows change it; open rows never touch it.
CREATE TABLE billing_totals (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    outstanding numeric(16, 2) NOT NULL DEFAULT 0
);
INSERT INTO billing_totals (outstanding)
SELECT coalesce(sum(CASE WHEN kind IN ('charge', 'refund') THEN amount ELSE -amount END), 0)
  FROM billing_transactions
 WHERE status = 'posted' AND deleted_at IS NULL;

CREATE FUNCTION billing_balance_of(kind text, status text, amount numeric, deleted_at timestamptz) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN status <> 'posted' OR deleted_at IS NOT NULL THEN 0
                WHEN kind IN ('charge', 'refund') THEN amount
                ELSE -amount END
$$;

CREATE FUNCTION billing_totals_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delta numeric := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        delta := delta + (SELECT coalesce(sum(billing_balance_of(kind, status, amount, deleted_at)), 0) FROM new_rows);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        delta := delta - (SELECT coalesce(sum(billing_balance_of(kind, status, amount, deleted_at)), 0) FROM old_rows);
    END IF;
    IF delta <> 0 THEN
        UPDATE billing_totals SET outstanding = outstanding + delta;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER billing_totals_inserted AFTER INSERT ON billing_transactions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_totals_changed();
CREATE TRIGGER billing_totals_updated AFTER UPDATE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_totals_changed();
CREATE TRIGGER billing_totals_deleted AFTER DELETE ON billing_transactions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION billing_totals_changed();

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY['billing_balance_of(text, text, numeric, timestamptz)', 'billing_totals_changed()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', fn, current_schema());
    END LOOP;
END
$$;
