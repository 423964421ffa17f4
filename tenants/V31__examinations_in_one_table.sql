-- The fourteen examinations share one table. Each was a table of its own with its four
-- indexes and its TOAST table: seventy relations of an empty branch, and more than a quarter
-- of what building one costs. Now they are one table, `examinations`, whose `exam` column
-- says which examination a row is, and fourteen simple views keep the fourteen names: the
-- server reads and writes each examination through its view (PostgreSQL writes through a
-- simple view to its table), and a view is one catalogue row with no storage or index.
--
-- Ids come from the branch's one sequence, so the rows of the fourteen tables keep theirs.
-- An examination's own columns are null in the others' rows; what was NOT NULL in its own
-- table is a CHECK on its rows here.

CREATE TABLE examinations (
    id bigint DEFAULT nextval('row_id_seq'::regclass) NOT NULL PRIMARY KEY,
    exam text NOT NULL CHECK (exam IN ('visual_acuity', 'refraction', 'tonometry', 'slit_lamp', 'funduscopy',
                                       'gonioscopy', 'corneal_topography', 'amsler_grid', 'eom', 'exophthalmometry',
                                       'lacrimal_irrigation', 'radiology', 'gross_examination',
                                       'indirect_ophthalmoscopy')),
    patient_id bigint NOT NULL REFERENCES patients(id),
    patient_visit_id bigint NOT NULL REFERENCES patient_visits(id),
    examined_at timestamptz DEFAULT now() NOT NULL,
    examiner_id bigint NOT NULL,
    notes text,
    status text DEFAULT 'draft' NOT NULL CHECK (status IN ('draft', 'signed')),
    signed_by bigint,
    signed_at timestamptz,
    amendment_reason text,
    amended_by bigint,
    amended_at timestamptz,
    right_eye jsonb CHECK (jsonb_typeof(right_eye) = 'object'),
    left_eye jsonb CHECK (jsonb_typeof(left_eye) = 'object'),
    version integer DEFAULT 1 NOT NULL,
    created_by bigint,
    updated_by bigint,
    created_at timestamptz DEFAULT now() NOT NULL,
    updated_at timestamptz DEFAULT now() NOT NULL,
    deleted_at timestamptz,
    -- visual acuity
    distance text,
    correction text,
    notation text,
    -- refraction
    kind text,
    -- funduscopy
    dilated boolean,
    -- corneal topography
    device text,
    -- extraocular motility
    deviation text,
    deviation_pd integer,
    diplopia boolean,
    nystagmus boolean,
    -- exophthalmometry
    base_mm integer,
    instrument text,
    -- radiology
    studies jsonb CHECK (jsonb_typeof(studies) = 'array'),
    CHECK ((status = 'signed') = (signed_at IS NOT NULL)),
    CONSTRAINT examinations_own_required CHECK (CASE exam
        WHEN 'visual_acuity' THEN distance IS NOT NULL AND correction IS NOT NULL AND notation IS NOT NULL
        WHEN 'refraction' THEN kind IS NOT NULL
        WHEN 'funduscopy' THEN dilated IS NOT NULL
        WHEN 'exophthalmometry' THEN base_mm IS NOT NULL
        WHEN 'radiology' THEN studies IS NOT NULL
        ELSE true END)
);

DO $$
DECLARE
    common CONSTANT text := 'id, patient_id, patient_visit_id, examined_at, examiner_id, notes, status, '
        'signed_by, signed_at, amendment_reason, amended_by, amended_at, right_eye, left_eye, version, '
        'created_by, updated_by, created_at, updated_at, deleted_at';
    one record;
    columns text;
BEGIN
    FOR one IN
        SELECT * FROM (VALUES
            ('visual_acuities', 'visual_acuity', ', distance, correction, notation'),
            ('refractions', 'refraction', ', kind'),
            ('tonometries', 'tonometry', ''),
            ('slit_lamps', 'slit_lamp', ''),
            ('funduscopies', 'funduscopy', ', dilated'),
            ('gonioscopies', 'gonioscopy', ''),
            ('corneal_topographies', 'corneal_topography', ', device'),
            ('amsler_grids', 'amsler_grid', ''),
            ('eoms', 'eom', ', deviation, deviation_pd, diplopia, nystagmus'),
            ('exophthalmometries', 'exophthalmometry', ', base_mm, instrument'),
            ('lacrimal_irrigations', 'lacrimal_irrigation', ''),
            ('radiologies', 'radiology', ', studies'),
            ('gross_examinations', 'gross_examination', ''),
            ('indirect_ophthalmoscopies', 'indirect_ophthalmoscopy', '')
        ) AS e(table_name, exam, own)
    LOOP
        columns := common || one.own;
        EXECUTE format('INSERT INTO examinations (exam, %s) SELECT %L, %s FROM %I', columns, one.exam, columns,
                       one.table_name);
        EXECUTE format('DROP TABLE %I', one.table_name);
        -- The view shows `exam` so that a write through it can default it; the check option
        -- keeps a write from turning a row into another examination.
        EXECUTE format('CREATE VIEW %I AS SELECT exam, %s FROM examinations WHERE exam = %L WITH LOCAL CHECK OPTION',
                       one.table_name, columns, one.exam);
        EXECUTE format('ALTER VIEW %I ALTER COLUMN exam SET DEFAULT %L', one.table_name, one.exam);
    END LOOP;
END
$$;
ALTER VIEW funduscopies ALTER COLUMN dilated SET DEFAULT false;

-- The readers of the fourteen tables' indexes, with the examination first where a query
-- names one (`tests/api/tenancy/indexes.rs` lists them).
CREATE INDEX examinations_examined_idx ON examinations (exam, examined_at, id) WHERE deleted_at IS NULL;
CREATE INDEX examinations_patient_idx ON examinations (patient_id, exam, examined_at, id);
CREATE INDEX examinations_visit_idx ON examinations (patient_visit_id);

CREATE TRIGGER examinations_patient_not_merged BEFORE INSERT OR UPDATE OF patient_id ON examinations
    FOR EACH ROW EXECUTE FUNCTION refuse_merged_patient();
