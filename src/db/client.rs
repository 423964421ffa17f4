//! A PostgreSQL connection whose prepared statements are cached per schema.
//!
//! PostgreSQL keeps a prepared statement's plan for the search_path it was prepared under and
//! analyses and plans it again whenever it runs under another. A branch connection moves
//! between branch schemas, so its statements are cached per schema: each runs only under the
//! search_path it was prepared for, and keeps its plan. The cache is bounded; the statements
//! used least recently go first (and are closed on the server). A registry connection never
//! moves (`public`): its statements are kept in deadpool-postgres's cache, bounded here too.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_postgres::{Error, IsolationLevel, Statement};

/// Statements one connection keeps prepared, at most.
pub const STATEMENTS_PER_CONNECTION: usize = 1_000;

/// A pooled connection, a branch pool's or the registry pool's, and its statement cache.
pub struct Client {
    connection: Connection,
    statements: Kept,
}

enum Connection {
    /// A branch pool's: the tokio-postgres client and the task driving its socket.
    Own { client: tokio_postgres::Client, conn_task: JoinHandle<()> },
    /// The registry pool's, handed back to it when dropped (boxed: it is larger than
    /// a branch pool's, and every slot of a branch pool would pay for its size).
    Registry(Box<deadpool_postgres::Object>),
}

/// Where a connection's prepared statements are kept.
#[derive(Clone)]
enum Kept {
    PerSchema(Arc<Statements>),
    Registry(Arc<deadpool_postgres::StatementCache>),
}

impl Kept {
    async fn prepare(&self, client: &tokio_postgres::Client, sql: &str) -> Result<Statement, Error> {
        match self {
            Self::PerSchema(statements) => statements.prepare(client, sql).await,
            Self::Registry(cache) => {
                let statement = cache.prepare(client, sql).await?;
                // deadpool-postgres's cache has no bound of its own: emptied when it passes
                // ours (dropped statements are closed on the server).
                if cache.size() > STATEMENTS_PER_CONNECTION {
                    cache.clear();
                }
                Ok(statement)
            }
        }
    }
}

impl Client {
    /// Wraps a connected client of a branch pool, keeping up to `statements` prepared;
    /// `generation` is what [`Statements`] compares against to notice that every cached
    /// statement of its pool was declared stale.
    pub fn keeping(
        client: tokio_postgres::Client,
        conn_task: JoinHandle<()>,
        generation: Arc<AtomicU64>,
        statements: usize,
    ) -> Self {
        Self {
            connection: Connection::Own { client, conn_task },
            statements: Kept::PerSchema(Arc::new(Statements::new(generation, statements))),
        }
    }

    /// A connection of the registry pool.
    pub fn registry(object: deadpool_postgres::Object) -> Self {
        let statements = Kept::Registry(object.statement_cache.clone());
        Self { connection: Connection::Registry(Box::new(object)), statements }
    }

    /// The schema the connection's search_path names, as far as the server confirmed it;
    /// `None` when unknown (a maintenance connection that sets its own) and on the registry's,
    /// which stays on `public`.
    pub fn schema(&self) -> Option<Arc<str>> {
        match &self.statements {
            Kept::PerSchema(statements) => statements.schema(),
            Kept::Registry(_) => None,
        }
    }

    /// Records the schema the search_path now names: statements prepared from now on are
    /// cached for it. (A registry connection is never switched: nothing to record.)
    pub fn set_schema(&self, schema: Option<Arc<str>>) {
        if let Kept::PerSchema(statements) = &self.statements {
            statements.set_schema(schema);
        }
    }

    /// The statement this connection keeps prepared for `sql` under `schema`, if any, without
    /// a round trip (a read that will switch to `schema` in the same round trip as it runs).
    pub fn cached(&self, schema: &Arc<str>, sql: &str) -> Option<Statement> {
        match &self.statements {
            Kept::PerSchema(statements) => statements.cached(schema, sql),
            Kept::Registry(_) => None,
        }
    }

    /// Like [`tokio_postgres::Client::prepare`], but reuses the statement this connection
    /// prepared for the same text under the same schema.
    pub async fn prepare_cached(&self, sql: &str) -> Result<Statement, Error> {
        self.statements.prepare(self, sql).await
    }

    pub async fn transaction(&mut self) -> Result<Transaction<'_>, Error> {
        let statements = self.statements.clone();
        Ok(Transaction { tx: (**self).transaction().await?, statements })
    }

    pub fn build_transaction(&mut self) -> TransactionBuilder<'_> {
        let statements = self.statements.clone();
        TransactionBuilder { builder: (**self).build_transaction(), statements }
    }

    /// How many statements the connection keeps prepared now.
    pub fn cached_statements(&self) -> usize {
        match &self.statements {
            Kept::PerSchema(statements) => statements.len(),
            Kept::Registry(cache) => cache.size(),
        }
    }
}

impl Deref for Client {
    type Target = tokio_postgres::Client;
    fn deref(&self) -> &Self::Target {
        match &self.connection {
            Connection::Own { client, .. } => client,
            Connection::Registry(object) => object,
        }
    }
}

impl DerefMut for Client {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match &mut self.connection {
            Connection::Own { client, .. } => client,
            Connection::Registry(object) => object,
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // A registry connection's task is its pool's to end, with the connection.
        if let Connection::Own { conn_task, .. } = &self.connection {
            conn_task.abort();
        }
    }
}

/// A transaction of a [`Client`], sharing its statement cache.
pub struct Transaction<'a> {
    tx: tokio_postgres::Transaction<'a>,
    statements: Kept,
}

impl Transaction<'_> {
    pub async fn prepare_cached(&self, sql: &str) -> Result<Statement, Error> {
        self.statements.prepare(self.tx.client(), sql).await
    }

    pub async fn commit(self) -> Result<(), Error> {
        self.tx.commit().await
    }

    pub async fn rollback(self) -> Result<(), Error> {
        self.tx.rollback().await
    }
}

impl<'a> Deref for Transaction<'a> {
    type Target = tokio_postgres::Transaction<'a>;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl DerefMut for Transaction<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

/// [`tokio_postgres::TransactionBuilder`] for a [`Client`].
#[must_use = "a builder does nothing until `start`"]
pub struct TransactionBuilder<'a> {
    builder: tokio_postgres::TransactionBuilder<'a>,
    statements: Kept,
}

impl<'a> TransactionBuilder<'a> {
    pub fn isolation_level(self, level: IsolationLevel) -> Self {
        Self { builder: self.builder.isolation_level(level), ..self }
    }

    pub fn read_only(self, read_only: bool) -> Self {
        Self { builder: self.builder.read_only(read_only), ..self }
    }

    pub fn deferrable(self, deferrable: bool) -> Self {
        Self { builder: self.builder.deferrable(deferrable), ..self }
    }

    pub async fn start(self) -> Result<Transaction<'a>, Error> {
        Ok(Transaction { tx: self.builder.start().await?, statements: self.statements })
    }
}

/// The statements one connection keeps prepared, by schema and text.
pub struct Statements {
    inner: Mutex<Cache>,
    /// The pool's generation: when it moves past the cache's, every statement is dropped
    /// (a migration changed the tables they were planned for).
    generation: Arc<AtomicU64>,
    capacity: usize,
}

#[derive(Default)]
struct Cache {
    schema: Option<Arc<str>>,
    by_schema: HashMap<Option<Arc<str>>, HashMap<Box<str>, Entry>>,
    len: usize,
    /// Bumped on every hit, so entries know when they were last used.
    clock: u64,
    generation: u64,
}

struct Entry {
    statement: Statement,
    used: u64,
}

impl Statements {
    fn new(generation: Arc<AtomicU64>, capacity: usize) -> Self {
        let cache = Cache { generation: generation.load(Ordering::Acquire), ..Cache::default() };
        Self { inner: Mutex::new(cache), generation, capacity }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        let mut cache = self.inner.lock().expect("statement cache poisoned");
        let generation = self.generation.load(Ordering::Acquire);
        if cache.generation != generation {
            cache.by_schema.clear();
            cache.len = 0;
            cache.generation = generation;
        }
        cache
    }

    fn schema(&self) -> Option<Arc<str>> {
        self.lock().schema.clone()
    }

    fn set_schema(&self, schema: Option<Arc<str>>) {
        self.lock().schema = schema;
    }

    fn len(&self) -> usize {
        self.lock().len
    }

    fn cached(&self, schema: &Arc<str>, sql: &str) -> Option<Statement> {
        self.lock().hit(&Some(schema.clone()), sql)
    }

    async fn prepare(&self, client: &tokio_postgres::Client, sql: &str) -> Result<Statement, Error> {
        let schema = {
            let mut cache = self.lock();
            let schema = cache.schema.clone();
            if let Some(statement) = cache.hit(&schema, sql) {
                return Ok(statement);
            }
            schema
        };
        // Prepared outside the lock; a concurrent miss of the same text may prepare it twice,
        // and the later one simply replaces the earlier in the cache.
        let statement = client.prepare(sql).await?;
        let mut cache = self.lock();
        if cache.schema != schema {
            // The connection moved to another schema meanwhile: use it, but do not cache it
            // under the wrong one.
            return Ok(statement);
        }
        let clock = cache.clock;
        let entry = Entry { statement: statement.clone(), used: clock };
        if cache.by_schema.entry(schema).or_default().insert(sql.into(), entry).is_none() {
            cache.len += 1;
        }
        if cache.len > self.capacity {
            cache.evict_to(self.capacity * 3 / 4);
        }
        Ok(statement)
    }
}

impl Cache {
    /// The statement kept for `sql` under `schema`, marked as used now.
    fn hit(&mut self, schema: &Option<Arc<str>>, sql: &str) -> Option<Statement> {
        self.clock += 1;
        let clock = self.clock;
        let entry = self.by_schema.get_mut(schema)?.get_mut(sql)?;
        entry.used = clock;
        Some(entry.statement.clone())
    }

    /// Drops the least recently used statements until `keep` remain.
    fn evict_to(&mut self, keep: usize) {
        let mut used: Vec<u64> = self.by_schema.values().flat_map(|s| s.values().map(|e| e.used)).collect();
        let drop = used.len().saturating_sub(keep);
        if drop == 0 {
            return;
        }
        let (_, cutoff, _) = used.select_nth_unstable(drop - 1);
        let cutoff = *cutoff;
        for statements in self.by_schema.values_mut() {
            statements.retain(|_, entry| entry.used > cutoff);
        }
        self.by_schema.retain(|_, statements| !statements.is_empty());
        self.len = self.by_schema.values().map(HashMap::len).sum();
    }
}
