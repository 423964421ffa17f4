-- Appointments' permissions, given to the roles of a registry that already has them as the
-- seed roles of a new one have them: reading to the roles that see the queue, booking to the
-- roles that move it, overbooking to administrators, doctors and the front desk. (A new
-- registry has no roles yet here; its seed roles carry them.)
INSERT INTO permissions (name, description) VALUES
    ('appointments.read', 'View doctors'' hours and appointments'),
    ('appointments.write', 'Keep doctors'' hours, book and move appointments'),
    ('appointments.overbook', 'Book an appointment over another or outside a doctor''s hours')
ON CONFLICT (name) DO NOTHING;

INSERT INTO role_permissions (role_id, permission)
SELECT r.id, p.permission
  FROM roles r
  CROSS JOIN (VALUES ('appointments.read', 'queue.read'),
                     ('appointments.write', 'queue.write')) AS p (permission, alongside)
 WHERE EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = p.alongside)
    OR EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'admin.access')
ON CONFLICT DO NOTHING;

INSERT INTO role_permissions (role_id, permission)
SELECT r.id, 'appointments.overbook'
  FROM roles r
 WHERE r.name IN ('doctor', 'receptionist')
    OR EXISTS (SELECT 1 FROM role_permissions rp WHERE rp.role_id = r.id AND rp.permission = 'admin.access')
ON CONFLICT DO NOTHING;
