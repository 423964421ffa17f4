-- The fourteen eye examinations. They share their columns (the visit and patient, when and by
-- whom, notes, signature and amendment, the right and left eye as jsonb); each adds its own.
DO $$
DECLARE
    exam text;
BEGIN
    FOREACH exam IN ARRAY ARRAY[
        'visual_acuities', 'refractions', 'tonometries', 'slit_lamps', 'funduscopies', 'gonioscopies',
        'corneal_topographies', 'amsler_grids', 'eoms', 'exophthalmometries', 'lacrimal_irrigations',
        'radiologies', 'gross_examinations', 'indirect_ophthalmoscopies'
    ] LOOP
        EXECUTE format($table$
            CREATE TABLE %1$I (
                id               bigserial PRIMARY KEY,
                patient_id       bigint NOT NULL REFERENCES patients,
                patient_visit_id bigint NOT NULL REFERENCES patient_visits,
                examined_at      timestamptz NOT NULL DEFAULT now(),
                -- A registry user with access to the branch, checked by the server on write.
                examiner_id      bigint NOT NULL,
                notes            text,
                status           text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'signed')),
                signed_by        bigint,
                signed_at        timestamptz,
                amendment_reason text,
                amended_by       bigint,
                amended_at       timestamptz,
                right_eye        jsonb CHECK (jsonb_typeof(right_eye) = 'object'),
                left_eye         jsonb CHECK (jsonb_typeof(left_eye) = 'object'),
                version          integer NOT NULL DEFAULT 1,
                created_by       bigint,
                updated_by       bigint,
                created_at       timestamptz NOT NULL DEFAULT now(),
                updated_at       timestamptz NOT NULL DEFAULT now(),
                deleted_at       timestamptz,
                CHECK ((status = 'signed') = (signed_at IS NOT NULL))
            );
            CREATE INDEX %2$I ON %1$I (patient_visit_id) WHERE deleted_at IS NULL;
            CREATE INDEX %3$I ON %1$I (patient_id, examined_at) WHERE deleted_at IS NULL;
            CREATE INDEX %4$I ON %1$I (examined_at, id) WHERE deleted_at IS NULL;
        $table$, exam, exam || '_visit_idx', exam || '_patient_idx', exam || '_examined_idx');
    END LOOP;
END
$$;

ALTER TABLE visual_acuities
    ADD COLUMN distance   text NOT NULL,
    ADD COLUMN correction text NOT NULL,
    ADD COLUMN notation   text NOT NULL;
ALTER TABLE refractions ADD COLUMN kind text NOT NULL;
ALTER TABLE funduscopies ADD COLUMN dilated boolean NOT NULL DEFAULT false;
ALTER TABLE corneal_topographies ADD COLUMN device text;
ALTER TABLE eoms
    ADD COLUMN deviation    text,
    ADD COLUMN deviation_pd integer,
    ADD COLUMN diplopia     boolean,
    ADD COLUMN nystagmus    boolean;
ALTER TABLE exophthalmometries
    ADD COLUMN base_mm    integer NOT NULL,
    ADD COLUMN instrument text;
ALTER TABLE radiologies ADD COLUMN studies jsonb NOT NULL CHECK (jsonb_typeof(studies) = 'array');
