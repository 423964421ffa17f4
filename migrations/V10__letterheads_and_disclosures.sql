-- What a branch prints at the top of its documents: its name (kept already), address, phone
-- and logo (a PNG or JPEG image, set with PUT /branches/{id}/logo).
ALTER TABLE branches
    ADD COLUMN address text,
    ADD COLUMN phone text,
    ADD COLUMN logo bytea,
    ADD COLUMN logo_media_type text CHECK (logo_media_type IN ('image/png', 'image/jpeg')),
    ADD CONSTRAINT branches_logo_check CHECK ((logo IS NULL) = (logo_media_type IS NULL));

-- The route a record of the audit log came through, as in every branch's audit log (and in
-- the copy kept of a dropped branch's).
ALTER TABLE audit_log ADD COLUMN route text;
ALTER TABLE dropped_branch_audit_log ADD COLUMN route text;

-- Reading a patient's access log is a permission of its own. Registries seeded before it
-- existed give it to their administrators' role, as a new registry does.
INSERT INTO permissions (name, description)
VALUES ('audit.read', 'View who read or changed a patient''s records')
ON CONFLICT (name) DO NOTHING;
INSERT INTO role_permissions (role_id, permission)
SELECT id, 'audit.read' FROM roles WHERE name = 'admin' AND deleted_at IS NULL
ON CONFLICT DO NOTHING;
