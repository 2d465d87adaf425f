//! Fresh databases for the conformance suite: every test gets its own, on every backend.
//!
//! The databases come from `tickwork-testkit` (SQLite in a temporary folder, PostgreSQL and
//! MySQL/MariaDB as `tw_<pid>_<random>` on the test servers, dropped afterwards, also when the
//! test panics); an unreachable server skips the test loudly, or fails it when `CI` is set.

use std::future::Future;
use std::sync::Arc;

use tickwork_store::{Store, StoreOptions};
use tickwork_testkit::TestDb;

pub(crate) use tickwork_testkit::Backend;

/// What a test gets: the store, and the means to open a second one on the same database
/// (another admin node).
#[derive(Clone)]
pub(crate) struct Ctx {
    pub store: Arc<dyn Store>,
    pub url: String,
    pub backend: Backend,
}

impl Ctx {
    /// Another store on the same database; runs the migrations again.
    pub(crate) async fn connect_again(&self) -> Arc<dyn Store> {
        tickwork_store::connect(&self.url, &StoreOptions::default())
            .await
            .expect("second connection to the test database")
    }
}

/// Runs `test` on a fresh database of `backend`, then drops the database.
pub(crate) async fn run<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(db) = TestDb::create(backend, "tw").await else {
        return;
    };
    let url = db.url().to_owned();
    let store = tickwork_store::connect(&url, &StoreOptions::default())
        .await
        .unwrap_or_else(|e| panic!("open the {} test database: {e:?}", backend.name()));
    let ctx = Ctx {
        store,
        url,
        backend,
    };
    test(ctx.clone()).await;
    ctx.store.close().await;
    db.drop_database().await;
}

/// Instantiates every listed test (an `async fn(Ctx)` in the named module of the suite) once
/// per backend: `sqlite::name`, `postgres::name`, `mysql::name`.
#[macro_export]
macro_rules! conformance {
    ($($module:ident: [$($test:ident),+ $(,)?]),+ $(,)?) => {
        $crate::conformance!(@backend sqlite, Sqlite, $($module: [$($test),+]),+);
        $crate::conformance!(@backend postgres, Postgres, $($module: [$($test),+]),+);
        $crate::conformance!(@backend mysql, MySql, $($module: [$($test),+]),+);
    };
    (@backend $backend:ident, $variant:ident, $($module:ident: [$($test:ident),+]),+) => {
        mod $backend {
            $($(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    $crate::support::run(
                        $crate::support::Backend::$variant,
                        super::$module::$test,
                    )
                    .await;
                }
            )+)+
        }
    };
}
