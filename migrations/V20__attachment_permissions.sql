-- Attachments' permissions, given to the roles of a registry that already has them as the seed
-- roles of a new one have them: reading to the roles that read examinations, adding and
-- removing to the roles that record them. (A new registry has no roles yet here; its seed
-- roles carry them.)
INSERT INTO permissions (name, description) VALUES
    ('attachments.read', 'View and download documents and images in patients'' charts'),
    ('attachments.write', 'Add documents and images to patients'' charts and remove them')
ON CONFLICT (name) DO NOTHING;

INSERT INTO role_permissions (role_id, permission)
SELECT r.id, 'attachments.read'
  FROM roles r
 WHERE EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'clinical.read')
    OR EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'admin.access')
ON CONFLICT DO NOTHING;

INSERT INTO role_permissions (role_id, permission)
SELECT r.id, 'attachments.write'
  FROM roles r
 WHERE EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'clinical.write')
    OR EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'admin.access')
ON CONFLICT DO NOTHING;
