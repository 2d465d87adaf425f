//! Database outages: a test's database refuses every connection and its open ones are ended,
//! then it comes back, while the shared server and other tests' databases carry on.
//!
//! PostgreSQL: the database stops accepting connections (`ALLOW_CONNECTIONS false`) and its
//! sessions are terminated. MySQL/MariaDB, which cannot close one database: the database gets a
//! user of its own, which clients connect as, and the outage locks that user (`ACCOUNT LOCK`)
//! and kills its connections. SQLite has no server, so no outage.

use std::str::FromStr;

use sqlx::{ConnectOptions, Connection, Executor};

use crate::db::{Backend, TestDb, server_execute, with_user};

/// A test database that can be taken down and brought back (see the module's text).
pub struct Outage {
    backend: Backend,
    server_url: String,
    database: String,
    /// MySQL/MariaDB: the database's own user, which the outage locks.
    user: Option<String>,
}

impl Outage {
    /// Readies `db` for outages and returns the URL its clients must connect with: on
    /// MySQL/MariaDB that of a user of its own, created here and dropped after the database.
    /// Panics for SQLite.
    pub async fn prepare(db: &mut TestDb) -> (Outage, String) {
        let backend = db.backend();
        assert!(backend != Backend::Sqlite, "no outage for SQLite");
        let database = db.name().expect("a server database").to_owned();
        let mut outage = Outage {
            backend,
            server_url: db.server_url().expect("a server database").to_owned(),
            database,
            user: None,
        };
        let mut url = db.url().to_owned();
        if backend == Backend::MySql {
            // The database name is `<prefix>_<pid>_<random>`: the user takes its last two parts,
            // which keeps it within MySQL's 32 characters.
            let suffix: Vec<&str> = outage.database.rsplitn(3, '_').take(2).collect();
            let user = format!("twu_{}_{}", suffix[1], suffix[0]);
            db.cleanup_after(format!("DROP USER IF EXISTS '{user}'@'%'"));
            for sql in [
                format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"),
                format!(
                    "GRANT ALL PRIVILEGES ON {}.* TO '{user}'@'%'",
                    outage.database
                ),
            ] {
                outage.must_execute(&sql).await;
            }
            url = with_user(&url, &user, "pw");
            outage.user = Some(user);
        }
        (outage, url)
    }

    /// Runs `sql` on the server, panicking when it fails.
    async fn must_execute(&self, sql: &str) {
        server_execute(self.backend, &self.server_url, sql)
            .await
            .unwrap_or_else(|e| panic!("`{sql}`: {e}"));
    }

    /// Starts the outage: new connections are refused and the open ones are ended.
    pub async fn take_down(&self) {
        let name = &self.database;
        match self.backend {
            Backend::Postgres => {
                self.must_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
                    .await;
                self.must_execute(&format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE datname = '{name}' AND pid <> pg_backend_pid()"
                ))
                .await;
            }
            Backend::MySql => {
                let user = self.user.as_deref().expect("the database's user");
                self.must_execute(&format!("ALTER USER '{user}'@'%' ACCOUNT LOCK"))
                    .await;
                let mut conn = sqlx::mysql::MySqlConnectOptions::from_str(&self.server_url)
                    .expect("server url")
                    .connect()
                    .await
                    .expect("server connection");
                let ids: Vec<(i64,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT CAST(id AS SIGNED) FROM information_schema.processlist \
                     WHERE user = '{user}'"
                )))
                .fetch_all(&mut conn)
                .await
                .expect("list connections");
                for (id,) in ids {
                    // A connection may end by itself meanwhile.
                    let _ = conn
                        .execute(sqlx::AssertSqlSafe(format!("KILL {id}")))
                        .await;
                }
                let _ = conn.close().await;
            }
            Backend::Sqlite => unreachable!("no outage for SQLite"),
        }
    }

    /// Ends the outage: connections are accepted again.
    pub async fn bring_back(&self) {
        let sql = match self.backend {
            Backend::Postgres => format!("ALTER DATABASE {} ALLOW_CONNECTIONS true", self.database),
            Backend::MySql => format!(
                "ALTER USER '{}'@'%' ACCOUNT UNLOCK",
                self.user.as_deref().expect("the database's user")
            ),
            Backend::Sqlite => unreachable!("no outage for SQLite"),
        };
        self.must_execute(&sql).await;
    }
}

#[cfg(test)]
mod tests {
    use sqlx::mysql::MySqlConnection;
    use sqlx::postgres::PgConnection;

    use super::*;

    /// Connections of type `C` to the database are cut by the outage and work again after it.
    async fn outage_cuts_and_restores<C>(backend: Backend)
    where
        C: Connection,
        for<'c> &'c mut C: Executor<'c>,
    {
        let Some(mut db) = TestDb::create(backend, "tw_outage").await else {
            return;
        };
        let (outage, url) = Outage::prepare(&mut db).await;
        let mut open = C::connect(&url).await.expect("connects before the outage");
        open.execute("SELECT 1").await.expect("a query before");

        outage.take_down().await;
        assert!(
            open.execute("SELECT 1").await.is_err(),
            "the open connection is ended"
        );
        assert!(
            C::connect(&url).await.is_err(),
            "new connections are refused"
        );

        outage.bring_back().await;
        let mut again = C::connect(&url).await.expect("connects after the outage");
        again.execute("SELECT 1").await.expect("a query after");
        let _ = again.close().await;
        db.drop_database().await;
    }

    #[tokio::test]
    async fn postgres_outage_cuts_and_restores_connections() {
        outage_cuts_and_restores::<PgConnection>(Backend::Postgres).await;
    }

    #[tokio::test]
    async fn mariadb_outage_cuts_and_restores_connections() {
        outage_cuts_and_restores::<MySqlConnection>(Backend::MySql).await;
    }
}
