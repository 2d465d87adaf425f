//! Admin nodes and leases.

use super::*;

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
        self.execute(q).await?;
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
        if self.execute(insert).await? > 0 {
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
        Ok(self.execute(renew).await? > 0)
    }

    async fn lease_release(&self, key: LeaseKey) -> Result<bool, Error> {
        let q = Query::new("DELETE FROM tw_leases WHERE name = ? AND holder = ?")
            .bind(key.name)
            .bind(key.node);
        Ok(self.execute(q).await? > 0)
    }
}
