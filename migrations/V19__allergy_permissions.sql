-- Allergies' permissions, given to the roles of a registry that already has them as the seed
-- roles of a new one have them: recording allergies to the roles that record examinations,
-- dispensing against an allergy to administrators and to the roles that dispense. (A new
-- registry has no roles yet here; its seed roles carry them.)
INSERT INTO permissions (name, description) VALUES
    ('allergies.write', 'Record and edit patients'' allergies'),
    ('pharmacy.allergy_override', 'Dispense a medicine the patient is allergic to, giving a reason')
ON CONFLICT (name) DO NOTHING;

INSERT INTO role_permissions (role_id, permission)
SELECT r.id, 'allergies.write'
  FROM roles r
 WHERE EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'clinical.write')
    OR EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'admin.access')
ON CONFLICT DO NOTHING;

INSERT INTO role_permissions (role_id, permission)
SELECT r.id, 'pharmacy.allergy_override'
  FROM roles r
 WHERE r.name = 'pharmacist'
    OR EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'admin.access')
ON CONFLICT DO NOTHING;

-- Why a transaction was completed over the patient's allergy, kept with it.
ALTER TABLE transactions ADD COLUMN allergy_override_reason text;
