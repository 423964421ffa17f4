//! `GET /dashboard/stats`: the branch's figures over a range from its daily rollups, the
//! registry's (surgeries, stock) from their own rows.

use salvo::prelude::*;
use serde_json::{Value, json};

use super::common::{in_zone, minutes, open_range, registered_between_1_and_2, with_total};
use crate::enums::{QUEUE_STATUS, VISIT_STATUS};
use crate::http::error::ApiResult;
use crate::http::{self as web};
use crate::resource::Scope;

/// `GET /dashboard/stats`.
#[handler]
pub async fn stats(req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
    let (ctx, clock, start, end) = open_range(req, depot).await?;
    let mut conn = ctx.conn(Scope::Branch).await?;
    let branch = conn.client();
    let stmt = branch
        .prepare_cached(concat!(
            "SELECT
               (SELECT live FROM row_counts WHERE table_name = 'patients'),
               (SELECT coalesce(sum(r.n), 0)::bigint ",
            registered_between_1_and_2!(),
            " AND r.dimension = 'all' AND r.value = '' AND r.spelling = ''),
               (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM
                   (SELECT status, sum(n) AS n FROM visit_day_counts
                     WHERE visit_date BETWEEN $1 AND $2 GROUP BY status HAVING sum(n) <> 0) v),
               (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM
                   (SELECT status, sum(n) AS n FROM queue_day_counts
                     WHERE queue_date BETWEEN $1 AND $2 GROUP BY status HAVING sum(n) <> 0) q),
               -- avg() is the sum over the count, as numeric: the same digits.
               (SELECT round(((sum(wait_seconds) / nullif(sum(waited), 0)) / 60)::numeric, 1) FROM queue_day_counts
                 WHERE queue_date BETWEEN $1 AND $2),
               round(coalesce(sum(b.charges), 0), 2)::text,
               round(coalesce(sum(b.payments), 0), 2)::text,
               (SELECT round(outstanding, 2)::text FROM billing_totals),
               (SELECT timezone FROM branch_info)
             FROM (SELECT charges, payments FROM billing_day_totals WHERE transaction_date BETWEEN $1 AND $2) b"
        ))
        .await?;
    let row = in_zone(branch, &clock.timezone, &stmt, &[&start, &end]).await?;
    let branch_id = ctx.branch()?.id;
    let registry = ctx.registry().await?;
    let shared = registry
        .query_one(
            "SELECT
               count(*) FILTER (WHERE s.status <> 'cancelled'),
               count(*) FILTER (WHERE s.status = 'completed'),
               count(*) FILTER (WHERE s.status = 'cancelled'),
               -- Items the branch keeps lots of (what filters[below_reorder] lists).
               (SELECT count(*)
                  FROM (SELECT pharmacy_item_id, sum(on_hand) AS level FROM stock_availables
                         WHERE branch_id = $1 AND deleted_at IS NULL GROUP BY pharmacy_item_id) kept
                  JOIN pharmacy_items i ON i.id = kept.pharmacy_item_id
                 WHERE i.deleted_at IS NULL AND i.reorder_level > 0 AND kept.level <= i.reorder_level),
               (SELECT count(*) FROM stock_availables l
                 WHERE l.branch_id = $1 AND l.deleted_at IS NULL AND l.on_hand > 0
                   AND l.expiry_date BETWEEN $5 AND $5 + 30)
             FROM surgery_schedules s
            WHERE s.branch_id = $1 AND s.deleted_at IS NULL
              AND s.scheduled_at >= ($2::date::timestamp AT TIME ZONE $4) AND s.scheduled_at < (($3::date + 1)::timestamp AT TIME ZONE $4)",
            &[&branch_id, &start, &end, &clock.timezone, &clock.today],
        )
        .await?;
    let visits: Value = row.get(2);
    let queue: Value = row.get(3);
    let mut queue = with_total(QUEUE_STATUS.values, &queue);
    queue.as_object_mut().map(|m| m.insert("average_wait_minutes".into(), minutes(row.get(4))));
    let data = json!({
        "start_date": start.to_string(),
        "end_date": end.to_string(),
        "patients_total": row.get::<_, i64>(0),
        "new_patients": row.get::<_, i64>(1),
        "visits": with_total(VISIT_STATUS.values, &visits),
        "queue": queue,
        "surgeries": {
            "scheduled": shared.get::<_, i64>(0),
            "completed": shared.get::<_, i64>(1),
            "cancelled": shared.get::<_, i64>(2),
        },
        "billing": {
            "charges": row.get::<_, String>(5),
            "payments": row.get::<_, String>(6),
            "outstanding": row.get::<_, String>(7),
        },
        "pharmacy": { "low_stock": shared.get::<_, i64>(3), "expiring_30_days": shared.get::<_, i64>(4) },
    });
    web::ok(res, "Statistics retrieved.", data);
    Ok(())
}
