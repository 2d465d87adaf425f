//! The one admin of the single-admin scenarios (create-jobs, jobs-page, workflow): started
//! alone on the bench database, with its API client and a fresh executor group.

use serde_json::json;

use super::Plan;
use super::api::{self, Api};
use super::db::{self, BenchDb};
use super::procs::{self, Proc};

/// The admin, how to reach it, and its group.
pub(super) struct Single {
    pub admin: Proc,
    /// `http://ip:port`.
    pub base: String,
    pub api: Api,
    /// The executor access token.
    pub token: String,
    pub api_token: String,
    /// The group's app name.
    pub app: String,
    pub group_id: i64,
}

/// Starts the admin (its console's `admin` signing in with `admin_password` when given) and
/// creates an executor group of automatic addresses.
pub(super) async fn start(
    plan: &Plan,
    db: &BenchDb,
    admin_password: Option<&str>,
) -> anyhow::Result<Single> {
    let (token, api_token) = (super::token(), super::token());
    let (admin, addr) = procs::start_admin(procs::AdminSpec {
        bin: &plan.bin,
        index: 0,
        db_url: &db.url,
        dir: &plan.dir,
        token: &token,
        api_token: &api_token,
        admin_password,
    })
    .await?;
    println!("admin-0 pid {} listening on {addr}", admin.pid);
    let base = format!("http://{addr}");
    let api = Api::new(vec![base.clone()], &api_token)?;
    let app = format!("tw-bench-{:06x}", db::rand_u32() & 0xff_ffff);
    let group_id = api::id_of(
        &api.post(
            0,
            "/groups",
            &json!({ "app_name": app, "title": "bench", "address_mode": "auto" }),
        )
        .await?,
    )?;
    Ok(Single {
        admin,
        base,
        api,
        token,
        api_token,
        app,
        group_id,
    })
}
