//! The one request context every handler works from: the state, the caller and, on
//! branch routes, the branch's route.

use std::collections::BTreeSet;
use std::sync::Arc;

use salvo::prelude::*;
use serde_json::{Map, Value};

use crate::db::Client;

use super::idempotency::Idempotency;
use crate::db::directory::BranchRoute;
use crate::db::{BranchConn, PendingBranchConn, Reads};
use crate::http::error::{ApiError, ApiResult};
use crate::http::guard::Endpoint;
use crate::state::{AppState, AuthUser};

/// Where a resource's rows live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In each branch schema; routes need `X-Branch-Id`.
    Branch,
    /// In the registry database; routes are global.
    Registry,
}

/// A connection to wherever a resource's rows live.
pub enum Conn {
    Branch(BranchConn),
    Registry(crate::db::RegistryConn),
}

impl Conn {
    pub fn client(&mut self) -> &mut Client {
        match self {
            Self::Branch(c) => c,
            Self::Registry(c) => c,
        }
    }

    /// The statements of a request, through the interface a [`ReadingConn`]'s take.
    pub fn reads(&self) -> Reads<'_> {
        match self {
            Self::Branch(c) => c.reads(),
            Self::Registry(c) => Reads::on(c),
        }
    }
}

/// A connection to wherever a resource's rows live, for a request whose first statement is
/// a read: a branch connection's switch to the branch's schema goes in that statement's
/// round trip, and until then the connection is reached only through [`ReadingConn::reads`].
pub enum ReadingConn {
    Branch(PendingBranchConn),
    Registry(crate::db::RegistryConn),
}

impl ReadingConn {
    /// The statements of the request; on a branch connection the first of them carries the
    /// switch to the branch's schema.
    pub fn reads(&self) -> Reads<'_> {
        match self {
            Self::Branch(c) => c.reads(),
            Self::Registry(c) => Reads::on(c),
        }
    }
}

/// Who is writing, with the state the write may need (registry references, hashing).
#[derive(Clone)]
pub struct Writer {
    pub user_id: i64,
    pub state: Arc<AppState>,
    /// The route of the branch being written, on branch routes.
    pub route: Option<Arc<BranchRoute>>,
    /// The `Idempotency-Key` claim of a POST, if it sent one.
    pub idempotency: Option<std::sync::Arc<Idempotency>>,
    /// The active branches the writer may work in (rows that belong to a branch).
    pub branches: Arc<BTreeSet<i64>>,
    /// The route of the request (`PUT /api/v1/patients/{id}`), named by its audit records.
    pub endpoint: Option<Arc<str>>,
    /// What the writer may do: a field only some may set (an overbooking) asks it.
    pub permissions: Arc<BTreeSet<String>>,
}

impl Writer {
    /// The branch being written, on branch routes.
    pub fn branch_id(&self) -> Option<i64> {
        self.route.as_ref().map(|route| route.id)
    }

    /// Whether the writer holds `permission`.
    pub fn can(&self, permission: &str) -> bool {
        self.permissions.contains(permission)
    }

    /// The route of the branch being written, on branch routes.
    pub fn branch_route(&self) -> ApiResult<Arc<BranchRoute>> {
        self.route.clone().ok_or_else(|| ApiError::Internal(anyhow::anyhow!("no branch being written")))
    }
}

pub struct Context {
    pub state: Arc<AppState>,
    pub user: Arc<AuthUser>,
    /// Set behind the `X-Branch-Id` hoop.
    pub branch: Option<Arc<BranchRoute>>,
    /// The claim of a POST's `Idempotency-Key`, made by the `Idempotent` hoop.
    pub idempotency: Option<Arc<Idempotency>>,
    /// The route the request reached (`GET /api/v1/patients/{id}`).
    pub endpoint: Option<Arc<str>>,
}

impl Context {
    /// The context of an authenticated request.
    pub fn of(depot: &Depot) -> ApiResult<Self> {
        Ok(Self {
            state: AppState::of(depot),
            user: AuthUser::current(depot)?,
            branch: depot.get_typed::<Arc<BranchRoute>>().ok().cloned(),
            idempotency: depot.get_typed::<Arc<Idempotency>>().ok().cloned(),
            endpoint: depot.get_typed::<Endpoint>().ok().map(|e| e.0.clone()),
        })
    }

    /// 403 unless the caller holds `permission`.
    pub fn require(&self, permission: &str) -> ApiResult<()> {
        if self.user.can(permission) {
            Ok(())
        } else {
            Err(ApiError::forbidden("You do not have permission to do this."))
        }
    }

    /// The route of the request's branch (only behind the branch hoop).
    pub fn branch(&self) -> ApiResult<&Arc<BranchRoute>> {
        self.branch.as_ref().ok_or_else(|| ApiError::Internal(anyhow::anyhow!("branch route missing")))
    }

    /// A connection to where rows of `scope` live. Take it after reading the body, so that a
    /// slow client never holds a connection others wait for.
    pub async fn conn(&self, scope: Scope) -> ApiResult<Conn> {
        match scope {
            Scope::Branch => Ok(Conn::Branch(self.state.directory.connect(self.branch()?).await?)),
            Scope::Registry => Ok(Conn::Registry(self.state.registry.get().await?)),
        }
    }

    /// Like [`Context::conn`] for a request whose first statement is a read through
    /// [`ReadingConn::reads`]: a branch connection's switch to the branch's schema goes in
    /// that statement's round trip.
    pub async fn reading_conn(&self, scope: Scope) -> ApiResult<ReadingConn> {
        match scope {
            Scope::Branch => {
                Ok(ReadingConn::Branch(self.state.directory.connect_deferred(self.branch()?).await?))
            }
            Scope::Registry => Ok(ReadingConn::Registry(self.state.registry.get().await?)),
        }
    }

    /// A registry connection.
    pub async fn registry(&self) -> ApiResult<crate::db::RegistryConn> {
        Ok(self.state.registry.get().await?)
    }

    /// The active branches the caller may work in, for rows that belong to a branch.
    pub fn accessible_branches(&self) -> Vec<i64> {
        self.user.branch_ids.iter().copied().collect()
    }

    pub fn writer(&self) -> Writer {
        Writer {
            user_id: self.user.id,
            state: self.state.clone(),
            route: self.branch.clone(),
            idempotency: self.idempotency.clone(),
            branches: self.user.branch_ids.clone(),
            endpoint: self.endpoint.clone(),
            permissions: self.user.permissions.clone(),
        }
    }

    /// The request body as a JSON object (size-limited), for the mechanism's own routes, which
    /// check it against their declarations.
    pub(super) async fn body(&self, req: &mut Request) -> ApiResult<Map<String, Value>> {
        crate::http::json_object(req, &self.state.settings).await
    }
}

/// Hoop: the caller must hold `permission` (403 otherwise).
pub struct Require(pub &'static str);

#[async_trait]
impl Handler for Require {
    async fn handle(&self, _req: &mut Request, depot: &mut Depot, res: &mut Response, ctrl: &mut FlowCtrl) {
        let allowed = AuthUser::current(depot).map(|u| u.can(self.0));
        let error = match allowed {
            Ok(true) => return,
            Ok(false) => ApiError::forbidden("You do not have permission to do this."),
            Err(e) => e,
        };
        res.render(error);
        ctrl.skip_rest();
    }
}
