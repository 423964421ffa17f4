//! Hand-written routes, each registered in one call together with its OpenAPI operation, so a
//! route cannot be served undescribed and the description cannot name a route nobody serves.
//! (Declared resources describe themselves from their declarations.)

use salvo::oapi::{Operation, PathItemType, RefOr, Schema};
use salvo::{Depot, FlowCtrl, Handler, Request, Response, Router};

use super::docs::{Access, Doc};

type Amendment = Box<dyn FnOnce(Operation) -> Operation + Send>;

/// A route's JSON body as declared once (`resource::input::Input`): the route's check and
/// typed value come from the same declaration as the schema described here.
pub trait DeclaredBody: Sync {
    /// The schema's name among the document's components; unique per body.
    fn name(&self) -> &'static str;
    fn schema(&self) -> RefOr<Schema>;
    /// Whether the body must be sent (some field is required).
    fn is_required(&self) -> bool;
}

/// Where a route registered with [`Endpoints::add_taking`] leaves the name of its body.
const DECLARED_BODY: &str = "declared_body";

/// The name of the body the route being served was registered with, if any.
pub fn declared_body_of(depot: &Depot) -> Option<&'static str> {
    depot.get::<&'static str>(DECLARED_BODY).ok().copied()
}

/// Hoop: marks the route's declared body, so that the handler can only read that one.
struct Declares(&'static str);

#[salvo::async_trait]
impl Handler for Declares {
    async fn handle(&self, _: &mut Request, depot: &mut Depot, _: &mut Response, _: &mut FlowCtrl) {
        depot.insert(DECLARED_BODY, self.0);
    }
}

/// A group of hand-written routes that one kind of caller reaches: public, any signed-in user,
/// or a user working in a branch (`X-Branch-Id`). The group's access picks the hoops the app
/// puts in front of it and the security its operations are described with.
pub struct Endpoints {
    access: Access,
    metered: bool,
    /// Open to a user who must turn a second factor on and has not yet (`MFA_REQUIRED_FOR`).
    before_enrolment: bool,
    /// Where the group's paths start: `/api/v1`, or the root for the few routes beside the API.
    base: &'static str,
    router: Router,
    operations: Vec<(PathItemType, String, Operation)>,
    amendments: Vec<(PathItemType, String, Amendment)>,
    bodies: Vec<&'static dyn DeclaredBody>,
}

impl Endpoints {
    pub fn new(access: Access) -> Self {
        Self {
            access,
            metered: true,
            before_enrolment: false,
            base: API,
            router: Router::new(),
            operations: Vec::new(),
            amendments: Vec::new(),
            bodies: Vec::new(),
        }
    }

    /// A group served at the root of the server, beside `/api/v1` (`/metrics`, `/display`).
    pub fn at_root(access: Access) -> Self {
        Self { base: "", ..Self::new(access) }
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether the group is served beside `/api/v1` rather than below it.
    pub fn is_at_root(&self) -> bool {
        self.base.is_empty()
    }

    /// Left out of the general per-user request limit (a route with a limit of its own).
    pub fn unmetered(mut self) -> Self {
        self.metered = false;
        self
    }

    pub fn is_metered(&self) -> bool {
        self.metered
    }

    /// Open to a signed-in user who must enrol a second factor and has not: what enrolling
    /// takes (the enrolment itself, the profile, logging out). Every other route refuses them.
    pub fn before_enrolment(mut self) -> Self {
        self.before_enrolment = true;
        self
    }

    pub fn is_open_before_enrolment(&self) -> bool {
        self.before_enrolment
    }

    /// Runs `hoop` before every route of the group.
    pub fn hoop(mut self, hoop: impl Handler) -> Self {
        self.router = self.router.hoop(hoop);
        self
    }

    /// Starts the description of one of this group's routes.
    pub fn operation(&self, tag: &str, summary: &str) -> Operation {
        Doc::operation(self.access, tag, summary)
    }

    /// Starts the description of one of this group's FHIR routes (answers and errors in FHIR
    /// JSON).
    pub fn fhir_operation(&self, tag: &str, summary: &str) -> Operation {
        Doc::fhir_operation(self.access, tag, summary)
    }

    /// Serves `handler` at `method` and `path` (below `/api/v1` unless the group is
    /// [`at_root`](Self::at_root), in the router's syntax: `patients/{id:num}`) and describes
    /// it with `operation`, named `id` (its `operationId`: a verb, then what it acts on, in
    /// camelCase, as `docs/api-decisions.md` has it).
    pub fn add(
        &mut self,
        method: PathItemType,
        path: &str,
        id: &str,
        handler: impl Handler,
        operation: Operation,
    ) {
        self.add_behind(method, path, id, None::<Passing>, handler, operation);
    }

    /// Serves `handler`, which reads the JSON body `body`, at `method` and `path`, and describes
    /// it with `operation`, named `id`, and the body's schema (a component of the document,
    /// named by the body's declaration).
    pub fn add_taking(
        &mut self,
        method: PathItemType,
        path: &str,
        id: &str,
        body: &'static dyn DeclaredBody,
        handler: impl Handler,
        operation: Operation,
    ) {
        let reference = RefOr::Ref(salvo::oapi::Ref::from_schema_name(body.name()));
        let operation = if body.is_required() {
            Doc::with_body(operation, reference)
        } else {
            Doc::with_optional_body(operation, reference)
        };
        self.add_behind(method, path, id, Some(Declares(body.name())), handler, operation);
        if !self.bodies.iter().any(|known| known.name() == body.name()) {
            self.bodies.push(body);
        }
    }

    /// [`add`](Self::add), with `hoop` run before this one route.
    pub fn add_behind(
        &mut self,
        method: PathItemType,
        path: &str,
        id: &str,
        hoop: Option<impl Handler>,
        handler: impl Handler,
        operation: Operation,
    ) {
        self.route(method, path, hoop, handler);
        self.operations.push((method, documented_path_below(self.base, path), operation.operation_id(id)));
    }

    fn route(&mut self, method: PathItemType, path: &str, hoop: Option<impl Handler>, handler: impl Handler) {
        let mut route = Router::with_path(path);
        if let Some(hoop) = hoop {
            route = route.hoop(hoop);
        }
        let route = match method {
            PathItemType::Get => route.get(handler),
            PathItemType::Post => route.post(handler),
            PathItemType::Put => route.put(handler),
            PathItemType::Delete => route.delete(handler),
            PathItemType::Patch => route.patch(handler),
            other => panic!("no route for {other:?}"),
        };
        self.router = std::mem::take(&mut self.router).push(route);
    }

    /// Serves `handler` in place of the shared one for an operation of a declared resource,
    /// which its declaration describes (and names; creating a branch also provisions its
    /// schema).
    pub fn serve_declared(&mut self, method: PathItemType, path: &str, handler: impl Handler) {
        self.route(method, path, None::<Passing>, handler);
    }

    /// Changes the description of a declared resource's operation that a hand-written part of
    /// the group changes (a conflict the shared handler does not give).
    pub fn amend(
        &mut self,
        method: PathItemType,
        path: &str,
        amend: impl FnOnce(Operation) -> Operation + Send + 'static,
    ) {
        self.amendments.push((method, path.to_owned(), Box::new(amend)));
    }

    pub fn into_router(self) -> Router {
        self.router
    }

    /// Adds the group's operations to `doc`; call after the declared resources are described,
    /// which the amendments change.
    pub fn describe(self, doc: &mut Doc) {
        for body in self.bodies {
            doc.add_schema(body.name(), body.schema());
        }
        for (method, path, operation) in self.operations {
            doc.add(method, &path, operation);
        }
        for (method, path, amend) in self.amendments {
            doc.amend(method, &path, amend);
        }
    }
}

/// No hoop: the type [`Endpoints::add`] passes for "none".
struct Passing;

#[salvo::async_trait]
impl Handler for Passing {
    async fn handle(&self, _: &mut Request, _: &mut Depot, _: &mut Response, _: &mut FlowCtrl) {}
}

/// Where the API's routes start.
const API: &str = "/api/v1";

/// A router path as the document writes it: `/api/v1/patients/{id}` for `patients/{id:num}`.
pub fn documented_path(path: &str) -> String {
    documented_path_below(API, path)
}

/// A router path below `base` as the document writes it.
fn documented_path_below(base: &str, path: &str) -> String {
    let bare: String = path
        .trim_matches('/')
        .split_inclusive('}')
        .map(|part| match (part.find('{'), part.find([':', '|'])) {
            (Some(open), Some(colon)) if colon > open && part.ends_with('}') => {
                format!("{}}}", &part[..colon])
            }
            _ => part.to_owned(),
        })
        .collect();
    format!("{base}/{bare}")
}

#[cfg(test)]
mod tests {
    use super::documented_path;

    #[test]
    fn paths_are_written_without_their_patterns() {
        assert_eq!(documented_path("patients/{id:num}/summary"), "/api/v1/patients/{id}/summary");
        assert_eq!(
            documented_path("branches/{branch_id:num}/services/{id:num}/staff/{user:num}"),
            "/api/v1/branches/{branch_id}/services/{id}/staff/{user}"
        );
        assert_eq!(documented_path("enums"), "/api/v1/enums");
        assert_eq!(documented_path("calendar/{id|[0-9]+}.ics"), "/api/v1/calendar/{id}.ics");
        assert_eq!(super::documented_path_below("", "metrics"), "/metrics");
    }
}
