//! Admin nodes and leases, and the calls relayed between nodes for pull executors.

use super::*;

/// PostgreSQL's notification channel of written pull calls (the payload: the address).
const PULL_CALLS_CHANNEL: &str = "tw_pull_calls";
/// PostgreSQL's notification channel of answered pull calls (the payload: the call's id).
const PULL_ANSWERS_CHANNEL: &str = "tw_pull_answers";

/// Runs one statement on the cluster's connections (a heartbeat or a lease renewal); the
/// number of rows it touched.
async fn execute_cluster<B: Backend>(store: &SqlStore<B>, q: Query) -> Result<u64, sqlx::Error> {
    let mut conn = store.cluster.acquire().await?;
    Ok(B::execute(&mut *conn, q).await?.rows)
}

#[async_trait]
impl<B: Backend> ClusterStore for SqlStore<B> {
    async fn node_heartbeat(&self, beat: NodeBeat) -> Result<(), Error> {
        check_required("node id", &beat.id, NODE_ID_MAX)?;
        check_len("node address", &beat.address, ADDRESS_MAX)?;
        let mut q = Query::new(format!(
            "INSERT INTO tw_nodes ({NODE_COLUMNS}) VALUES (?, ?, ?, ?)"
        ))
        .bind(&beat.id)
        .bind(&beat.address)
        .bind(beat.now)
        .bind(beat.now);
        q.push(&B::KIND.on_conflict_update("id", &["address", "heartbeat_at"]));
        execute_cluster(self, q).await?;
        Ok(())
    }

    async fn nodes_list(&self) -> Result<Vec<Node>, Error> {
        let q = Query::new(format!("SELECT {NODE_COLUMNS} FROM tw_nodes"));
        let mut nodes: Vec<Node> = self
            .fetch_all::<NodeRow>(q)
            .await?
            .into_iter()
            .map(Node::from)
            .collect();
        nodes.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        Ok(nodes)
    }

    async fn node_leave(&self, node_id: &str) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_nodes WHERE id = ?").bind(node_id);
        Ok(self.execute(q).await? > 0)
    }

    async fn nodes_sweep(&self, older_than: i64) -> Result<u64, Error> {
        let q = Query::new("DELETE FROM tw_nodes WHERE heartbeat_at < ?").bind(older_than);
        Ok(self.execute(q).await?)
    }

    async fn lease_acquire(&self, request: LeaseRequest) -> Result<bool, Error> {
        check_required("lease name", &request.name, LEASE_NAME_MAX)?;
        check_required("node id", &request.node, NODE_ID_MAX)?;
        if request.ttl_ms <= 0 {
            return Err(Error::Invalid("lease ttl must be positive".to_owned()));
        }
        let expires_at = request.now.saturating_add(request.ttl_ms);
        // Two atomic statements, no transaction: the insert wins a free lease; otherwise the
        // conditional update renews our own or steals an expired one. Each database re-checks
        // the update's condition on the row's newest version, so two nodes cannot both win.
        let mut insert = Query::new(B::KIND.insert_or_skip());
        insert
            .push("tw_leases (name, holder, expires_at) VALUES (")
            .push_bind(request.name.as_str())
            .push(", ")
            .push_bind(request.node.as_str())
            .push(", ")
            .push_bind(expires_at)
            .push(")")
            .push(&B::KIND.on_conflict_skip("name"));
        if execute_cluster(self, insert).await? > 0 {
            return Ok(true);
        }
        let renew = Query::new(
            "UPDATE tw_leases SET holder = ?, expires_at = ? \
             WHERE name = ? AND (holder = ? OR expires_at <= ?)",
        )
        .bind(request.node.as_str())
        .bind(expires_at)
        .bind(request.name.as_str())
        .bind(request.node.as_str())
        .bind(request.now);
        Ok(execute_cluster(self, renew).await? > 0)
    }

    async fn lease_release(&self, key: LeaseKey) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_leases WHERE name = ? AND holder = ?")
            .bind(key.name)
            .bind(key.node);
        Ok(self.execute(q).await? > 0)
    }

    async fn pull_call_put(&self, call: PullCallNew) -> Result<i64, Error> {
        check_required("address", &call.address, ADDRESS_MAX)?;
        let address = call.address.clone();
        check_required("app name", &call.app, APP_NAME_MAX)?;
        check_required("path", &call.path, ADDRESS_MAX)?;
        let q = Query::new(
            "INSERT INTO tw_pull_calls (address, app, path, body, rank_order, created_at, \
             deadline_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(call.address)
        .bind(call.app)
        .bind(call.path)
        .bind(call.body)
        .bind(call.rank)
        .bind(call.now)
        .bind(call.deadline_at);
        let mut conn = self.writes.acquire().await?;
        let id = Self::insert_id(&mut conn, q)
            .await?
            .ok_or_else(|| Error::corrupt("the pull call insert wrote no row".to_owned()))?;
        if B::KIND == Kind::Postgres {
            let notify = Query::new("SELECT pg_notify(?, ?)")
                .bind(PULL_CALLS_CHANNEL)
                .bind(address);
            B::execute(&mut *conn, notify).await?;
        }
        Ok(id)
    }

    async fn pull_calls_take(&self, take: PullCallsTake) -> Result<Vec<PullCall>, Error> {
        let mut conn = self.writes.acquire().await?;
        let stale =
            Query::new("DELETE FROM tw_pull_calls WHERE created_at < ?").bind(take.stale_before);
        B::execute(&mut *conn, stale).await?;
        if take.addresses.is_empty() {
            return Ok(Vec::new());
        }
        // Marked first, read after: a call withdrawn meanwhile (deleted while untaken) is
        // neither marked nor read, and one marked is read by this take only (a take is one
        // node's, at one instant of its clock).
        let mut mark = Query::new("UPDATE tw_pull_calls SET taken_at = ").one_off();
        mark.push_bind(take.now)
            .push(" WHERE taken_at IS NULL AND deadline_at > ")
            .push_bind(take.now)
            .push(" AND address IN ");
        mark.push_list(take.addresses.iter().map(String::as_str));
        if B::execute(&mut *conn, mark).await?.rows == 0 {
            return Ok(Vec::new());
        }
        let mut read = Query::new(
            "SELECT id, address, app, path, body, rank_order, deadline_at FROM tw_pull_calls \
             WHERE taken_at = ",
        )
        .one_off();
        read.push_bind(take.now)
            .push(" AND answered_at IS NULL AND address IN ");
        read.push_list(take.addresses.iter().map(String::as_str));
        read.push(" ORDER BY id LIMIT ")
            .push_bind(i64::from(take.limit));
        let rows: Vec<(i64, String, String, String, String, i64, i64)> =
            B::fetch_all(&mut *conn, read).await?;
        Ok(rows
            .into_iter()
            .map(
                |(id, address, app, path, body, rank, deadline_at)| PullCall {
                    id,
                    address,
                    app,
                    path,
                    body,
                    rank,
                    deadline_at,
                },
            )
            .collect())
    }

    async fn pull_call_answer(&self, answer: PullCallAnswer) -> Result<bool, Error> {
        let q = Query::new(
            "UPDATE tw_pull_calls SET answer = ?, answered_at = ? \
             WHERE id = ? AND answered_at IS NULL",
        )
        .bind(answer.answer)
        .bind(answer.now)
        .bind(answer.id);
        let mut conn = self.writes.acquire().await?;
        let answered = B::execute(&mut *conn, q).await?.rows > 0;
        if answered && B::KIND == Kind::Postgres {
            let notify = Query::new("SELECT pg_notify(?, ?)")
                .bind(PULL_ANSWERS_CHANNEL)
                .bind(answer.id.to_string());
            B::execute(&mut *conn, notify).await?;
        }
        Ok(answered)
    }

    async fn pull_call_collect(&self, id: i64) -> Result<PullCallState, Error> {
        let mut conn = self.writes.acquire().await?;
        let read = Query::new("SELECT taken_at, answer FROM tw_pull_calls WHERE id = ?").bind(id);
        let row: Option<(Option<i64>, Option<String>)> =
            B::fetch_optional(&mut *conn, read).await?;
        Ok(match row {
            None => PullCallState::Withdrawn,
            Some((_, Some(answer))) => {
                let delete = Query::new("DELETE FROM tw_pull_calls WHERE id = ?").bind(id);
                B::execute(&mut *conn, delete).await?;
                PullCallState::Answered(answer)
            }
            Some((Some(_), None)) => PullCallState::Taken,
            Some((None, None)) => PullCallState::Waiting,
        })
    }

    async fn pull_wakeups(&self) -> Result<Option<tokio::sync::mpsc::Receiver<PullWake>>, Error> {
        B::listen(
            &self.writes,
            &[PULL_CALLS_CHANNEL, PULL_ANSWERS_CHANNEL],
            pull_wake,
        )
        .await
    }

    async fn pull_call_withdraw(&self, id: i64) -> Result<PullCallState, Error> {
        let q = Query::new("DELETE FROM tw_pull_calls WHERE id = ? AND taken_at IS NULL").bind(id);
        if self.execute(q).await? > 0 {
            return Ok(PullCallState::Withdrawn);
        }
        self.pull_call_collect(id).await
    }
}

/// A notification of [`PULL_CALLS_CHANNEL`] or [`PULL_ANSWERS_CHANNEL`] as the admins read it.
fn pull_wake(channel: &str, payload: &str) -> Option<PullWake> {
    match channel {
        PULL_CALLS_CHANNEL => Some(PullWake::Call(payload.to_owned())),
        _ => payload.parse().ok().map(PullWake::Answer),
    }
}
