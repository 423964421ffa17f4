-- A lot with movements is part of the ledger: it is never deleted again (409 in_use), and a
-- lot that should no longer be used is made inactive instead. Inactive lots take no new
-- dispensing or receipts; voids and write-offs still reach them.
ALTER TABLE stock_availables ADD COLUMN active boolean NOT NULL DEFAULT true;

-- Lots deleted before this rule while they had movements come back, inactive, so that every
-- movement finds its lot (a void returns stock into it). Where a live lot has since taken the
-- same number, or several deleted lots share one, the newest comes back and the rest stay.
UPDATE stock_availables s
   SET deleted_at = NULL, active = false
 WHERE s.id IN (
        SELECT DISTINCT ON (d.branch_id, d.pharmacy_item_id, d.lot_no) d.id
          FROM stock_availables d
         WHERE d.deleted_at IS NOT NULL
           AND EXISTS (SELECT 1 FROM stock_movements m WHERE m.stock_available_id = d.id)
           AND NOT EXISTS (SELECT 1 FROM stock_availables live
                            WHERE live.deleted_at IS NULL AND live.branch_id = d.branch_id
                              AND live.pharmacy_item_id = d.pharmacy_item_id AND live.lot_no = d.lot_no)
         ORDER BY d.branch_id, d.pharmacy_item_id, d.lot_no, d.id DESC);
