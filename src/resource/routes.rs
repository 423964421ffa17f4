//! HTTP for declared resources: one handler type serves every resource and operation.

use crate::resource::row::Fields;
use salvo::http::header::{ETAG, HeaderValue, LOCATION};
use salvo::prelude::*;
use serde_json::{Map, Value};

use super::Resource;
use super::actions::{Action, Verb};
use super::context::{Context, ReadingConn};
use super::etag::{IfMatch, etag, tag_of};
use super::idempotency::Answer;
use super::print;
use super::reads::{audit_seen, parent_named, record_read, write_queued_reads};
use super::store::{self, Conn, Within};
use super::unit::Written;
use super::validate::{check_fields, validate_fields};
use crate::db::Reads;
use crate::http::error::{ApiError, ApiResult};
use crate::http::guard::{JSON_OR_PDF, Produces};
use crate::http::{self as web, list};

#[derive(Clone, Copy, Debug)]
pub enum Op {
    List,
    Create,
    Show,
    Update,
    Delete,
}

/// The shared handler of one operation on one resource.
pub struct ResourceHandler {
    resource: &'static Resource,
    op: Op,
}

pub fn handler(resource: &'static Resource, op: Op) -> ResourceHandler {
    ResourceHandler { resource, op }
}

#[async_trait]
impl Handler for ResourceHandler {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, _ctrl: &mut FlowCtrl) {
        if let Err(e) = self.run(req, depot, res).await {
            res.render(e);
        }
    }
}

/// Writes an answer as kept with an Idempotency-Key.
pub fn render(res: &mut Response, answer: &Answer) {
    crate::http::error::render_json(
        res,
        salvo::http::StatusCode::from_u16(answer.status).unwrap_or_default(),
        &answer.body,
    );
}

/// 201 with the record, its ETag and its Location.
pub fn respond_created(req: &Request, res: &mut Response, resource: &Resource, record: Value) {
    set_etag(res, &record);
    if let Some(id) = record.integer("id")
        && let Ok(location) =
            HeaderValue::from_str(&format!("{}/{id}", req.uri().path().trim_end_matches('/')))
    {
        res.headers_mut().insert(LOCATION, location);
    }
    web::created(res, &format!("{} created.", resource.label), record);
}

/// 200 with the record and its ETag.
pub fn respond_updated(res: &mut Response, resource: &Resource, record: Value) {
    set_etag(res, &record);
    web::ok(res, &format!("{} updated.", resource.label), record);
}

pub fn set_etag(res: &mut Response, record: &Value) {
    if let Some(tag) = etag(record).and_then(|t| HeaderValue::from_str(&t).ok()) {
        res.headers_mut().insert(ETAG, tag);
    }
}

/// The caller's branches when `resource`'s rows belong to a branch, else none: an
/// administrator of a thousand branches would otherwise copy a thousand ids per request.
fn branches_bounding(ctx: &Context, resource: &Resource) -> Vec<i64> {
    if resource.branch_bound { ctx.accessible_branches() } else { Vec::new() }
}

/// The rows of `resource` a request may reach: the parent in its path, and for rows that
/// belong to a branch, the caller's branches.
pub fn within_of<'a>(resource: &Resource, req: &Request, branches: &'a [i64]) -> ApiResult<Within<'a>> {
    Ok(Within {
        parent: match resource.parent {
            Some(parent) => Some((parent.column, web::path_id(req, parent.param)?)),
            None => None,
        },
        branches: resource.branch_bound.then_some(branches),
    })
}

/// The list rules a resource declares.
pub fn list_rules(resource: &Resource) -> list::ListRules<'static> {
    list::ListRules {
        sort_fields: resource.sort_fields,
        default_sort: resource.default_sort,
        default_direction: resource.default_direction,
        filters: resource.filters,
        date_range: resource.date_range.is_some(),
        window: resource.dated_by_instants(),
        aliases: resource.filter_aliases,
        extra: &[],
    }
}

impl ResourceHandler {
    async fn run(&self, req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
        let ctx = Context::of(depot)?;
        ctx.require(match self.op {
            Op::List | Op::Show => self.resource.read_permission,
            Op::Create | Op::Update | Op::Delete => self.resource.write_permission,
        })?;
        let branches = branches_bounding(&ctx, self.resource);
        let within = within_of(self.resource, req, &branches)?;
        match self.op {
            Op::List => self.list(&ctx, req, res, within).await,
            Op::Show => self.show(&ctx, req, res, within).await,
            Op::Create => self.create(&ctx, req, res, within).await,
            Op::Update => self.update(&ctx, req, res, within).await,
            Op::Delete => self.delete(&ctx, req, res, within).await,
        }
    }

    /// After a write committed (its stale cache entries already dropped by the unit): the
    /// resource's own after-commit work.
    async fn committed(&self, ctx: &Context, written: &Written) {
        self.resource.hooks.committed(&ctx.writer(), written.before.as_ref(), written.record.as_ref()).await;
    }

    /// A connection to the resource's rows, once the parent in the path is known to exist.
    async fn connect(&self, ctx: &Context, within: Within<'_>) -> ApiResult<Conn> {
        let conn = ctx.conn(self.resource.scope).await?;
        self.check_parent(&conn.reads(), within).await?;
        Ok(conn)
    }

    /// Like `connect`, for a request that reads first: the switch to the branch's schema
    /// goes with the first statement (the parent's check or the read itself).
    async fn connect_to_read(&self, ctx: &Context, within: Within<'_>) -> ApiResult<ReadingConn> {
        let conn = ctx.reading_conn(self.resource.scope).await?;
        self.check_parent(&conn.reads(), within).await?;
        Ok(conn)
    }

    /// 404 unless the parent in the path exists.
    async fn check_parent(&self, reads: &Reads<'_>, within: Within<'_>) -> ApiResult<()> {
        if let Some((_, parent_id)) = within.parent
            && !store::parent_exists(reads, self.resource, parent_id).await?
        {
            return Err(ApiError::NotFound);
        }
        Ok(())
    }

    async fn list(
        &self,
        ctx: &Context,
        req: &Request,
        res: &mut Response,
        within: Within<'_>,
    ) -> ApiResult<()> {
        let pairs = list::query_pairs(req);
        let mut query = list::parse(&pairs, &list_rules(self.resource))?;
        query.zone = ctx.branch().ok().map(|route| route.timezone.clone());
        if self.resource.shows_reads {
            write_queued_reads(ctx).await;
        }
        let conn = self.connect_to_read(ctx, within).await?;
        let page = store::list(&conn.reads(), self.resource, within, &query).await?;
        drop(conn);
        if self.resource.audit_reads {
            audit_seen(ctx, self.resource, within, &page.ids, &pairs).await?;
        }
        let base = web::base_url(req, ctx.state.trusts_forwarded_headers(req));
        let count = page.ids.len() as i64;
        let body = list::raw_envelope(&base, req.uri().path(), &pairs, &query, page.total, count, &page.data);
        res.render(Text::Json(body));
        Ok(())
    }

    async fn show(
        &self,
        ctx: &Context,
        req: &Request,
        res: &mut Response,
        within: Within<'_>,
    ) -> ApiResult<()> {
        let id = web::path_id(req, "id")?;
        if self.resource.shows_reads {
            write_queued_reads(ctx).await;
        }
        let printed = self.resource.printable.filter(|_| print::wants_print(req));
        let conn = self.connect_to_read(ctx, within).await?;
        let (data, version) = store::fetch(&conn.reads(), self.resource, within, id).await?;
        drop(conn);
        if let Some(printable) = printed {
            let record: Value = serde_json::from_str(&data).map_err(anyhow::Error::from)?;
            return print::answer(ctx, res, printable, self.resource, id, &record).await;
        }
        if self.resource.audit_reads {
            record_read(ctx, self.resource.path, "view", Some(id), parent_named(within)).await?;
        }
        if let Some(tag) = version.and_then(|v| HeaderValue::from_str(&tag_of(v.into())).ok()) {
            res.headers_mut().insert(ETAG, tag);
        }
        web::ok_text(res, &format!("{} retrieved.", self.resource.label), &data);
        Ok(())
    }

    async fn create(
        &self,
        ctx: &Context,
        req: &mut Request,
        res: &mut Response,
        within: Within<'_>,
    ) -> ApiResult<()> {
        let body = ctx.body(req).await?;
        let mut conn = self.connect(ctx, within).await?;
        let input = checked_input(ctx, &mut conn, self.resource, &body, None).await?;
        let written = store::create(&mut conn, ctx.writer(), self.resource, within, input).await?;
        self.committed(ctx, &written).await;
        respond_created(req, res, self.resource, written.record.unwrap_or_default());
        Ok(())
    }

    async fn update(
        &self,
        ctx: &Context,
        req: &mut Request,
        res: &mut Response,
        within: Within<'_>,
    ) -> ApiResult<()> {
        let id = web::path_id(req, "id")?;
        let if_match = IfMatch::of(req);
        let body = ctx.body(req).await?;
        let mut conn = self.connect(ctx, within).await?;
        let input = checked_input(ctx, &mut conn, self.resource, &body, Some(id)).await?;
        let written =
            store::update(&mut conn, ctx.writer(), self.resource, within, id, input, if_match).await?;
        self.committed(ctx, &written).await;
        respond_updated(res, self.resource, written.record.unwrap_or_default());
        Ok(())
    }

    async fn delete(
        &self,
        ctx: &Context,
        req: &mut Request,
        res: &mut Response,
        within: Within<'_>,
    ) -> ApiResult<()> {
        let id = web::path_id(req, "id")?;
        let if_match = IfMatch::of(req);
        let input = sent_with_delete(ctx, req).await?;
        let mut conn = self.connect(ctx, within).await?;
        let written =
            store::delete(&mut conn, ctx.writer(), self.resource, within, id, &input, if_match).await?;
        self.committed(ctx, &written).await;
        // A delete that keeps the record (a void) shows it.
        if let Some(record) = &written.record {
            set_etag(res, record);
        }
        render(res, &store::deleted_answer(self.resource, &written));
        Ok(())
    }
}

/// What a DELETE carries for a resource's own delete (a void reason): the body's fields,
/// then query parameters for fields the body did not give.
async fn sent_with_delete(ctx: &Context, req: &mut Request) -> ApiResult<Map<String, Value>> {
    let mut input = ctx.body(req).await?;
    for (key, value) in list::query_pairs(req) {
        input.entry(key).or_insert(Value::String(value));
    }
    Ok(input)
}

/// The body checked against the declaration and prepared by the resource's hooks (`id` is
/// `None` on create); when fields are wrong, the references among the others are checked too,
/// so that one 422 names every bad field.
async fn checked_input(
    ctx: &Context,
    conn: &mut Conn,
    resource: &Resource,
    body: &Map<String, Value>,
    id: Option<i64>,
) -> ApiResult<Map<String, Value>> {
    let (mut input, mut errors) = validate_fields(resource, body, id.is_none());
    if errors.is_empty() {
        resource.hooks.prepare(&ctx.writer(), id, &mut input).await?;
        return Ok(input);
    }
    let more = store::reference_errors(conn, &ctx.writer(), resource, input, &errors).await?;
    errors.extend(more);
    Err(ApiError::Validation(errors))
}

/// The shared handler of a declared action (`POST /<path>/{id}/<segment>`).
pub struct ActionHandler {
    resource: &'static Resource,
    action: &'static Action,
}

#[async_trait]
impl Handler for ActionHandler {
    async fn handle(&self, req: &mut Request, depot: &mut Depot, res: &mut Response, _ctrl: &mut FlowCtrl) {
        if let Err(e) = self.run(req, depot, res).await {
            res.render(e);
        }
    }
}

impl ActionHandler {
    async fn run(&self, req: &mut Request, depot: &mut Depot, res: &mut Response) -> ApiResult<()> {
        let (resource, action) = (self.resource, self.action);
        let ctx = Context::of(depot)?;
        ctx.require(action.permission.unwrap_or(resource.write_permission))?;
        let branches = branches_bounding(&ctx, resource);
        let within = within_of(resource, req, &branches)?;
        let id = web::path_id(req, "id")?;
        let if_match = IfMatch::of(req);
        let body = ctx.body(req).await?;
        let (input, errors) = check_fields(action.input.iter(), &body, true, |_| false);
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        let handler = ResourceHandler { resource, op: Op::Update };
        let mut conn = handler.connect(&ctx, within).await?;
        let written =
            store::act(&mut conn, ctx.writer(), resource, within, id, action, input, if_match).await?;
        handler.committed(&ctx, &written).await;
        let record = written.record.unwrap_or_default();
        set_etag(res, &record);
        web::ok(res, action.done, record);
        Ok(())
    }
}

/// `/<path>` and `/<path>/{id}` with the five CRUD operations, and `/<path>/{id}/<segment>`
/// for each declared action.
pub fn router(resource: &'static Resource) -> Router {
    let h = |op| ResourceHandler { resource, op };
    let show = Router::with_filter(salvo::routing::filters::get()).goal(h(Op::Show));
    // A record that prints may be asked for in PDF.
    let show = if resource.printable.is_some() { show.hoop(Produces(JSON_OR_PDF)) } else { show };
    let mut member = Router::with_path("{id:num}").push(show);
    if resource.writable {
        member = member.put(h(Op::Update)).delete(h(Op::Delete));
    }
    for action in resource.actions {
        let route = Router::with_path(action.segment);
        let handler = ActionHandler { resource, action };
        member = member.push(match action.verb {
            Verb::Post => route.post(handler),
            Verb::Put => route.put(handler),
            Verb::Patch => route.patch(handler),
        });
    }
    let collection = Router::with_path(web::numeric_params(resource.path)).get(h(Op::List));
    let collection = if resource.writable { collection.post(h(Op::Create)) } else { collection };
    collection.push(member)
}
