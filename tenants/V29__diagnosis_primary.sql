-- A visit's diagnosis says whether it is the primary one in a field named as clinics name it,
-- `primary` (a word SQL reserves: the column is quoted wherever it is written).
ALTER TABLE visit_diagnoses RENAME COLUMN is_primary TO "primary";
