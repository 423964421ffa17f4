-- What the branch is owed is a sum over every posted row: it is kept exact, never narrowed to
-- a column's precision (the rows themselves stay numeric(12, 2)).
ALTER TABLE billing_totals ALTER COLUMN outstanding TYPE numeric;
