//! The executor address cache: each group's live addresses and the client that calls them,
//! kept fresh in the background so that dispatch never waits for the database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tickwork_store::{AddressMode, Group, LiveQuery, Store};
use tracing::debug;

use crate::Error;
use crate::executor_client::ExecutorClient;

use super::clock::Clock;

/// How long a dispatch waits for a group's addresses it must read before it falls back on
/// the last known list (or, without one, holds the run). It bounds database IO: real time.
const ADDRESS_REFRESH_TIMEOUT: Duration = Duration::from_secs(1);

/// The addresses a group's runs may go to at `now` (the service's group views): its manual
/// list, or the registry's executors of its app name that beat within `dead_after_ms`
/// (sorted ascending, as XXL-JOB does).
pub(crate) async fn live_addresses(
    store: &dyn Store,
    group: &Group,
    now: i64,
    dead_after_ms: i64,
) -> Result<Vec<String>, Error> {
    live_addresses_since(store, group, now - dead_after_ms).await
}

/// A group's manual list, or its registry's executors that beat at `alive_since` or later.
async fn live_addresses_since(
    store: &dyn Store,
    group: &Group,
    alive_since: i64,
) -> Result<Vec<String>, Error> {
    if group.address_mode == AddressMode::Manual {
        return Ok(group.addresses.clone());
    }
    Ok(store
        .registry_live(LiveQuery {
            app_name: group.app_name.clone(),
            alive_since,
        })
        .await?)
}

/// A group's live addresses, read at `at` (the scheduler's clock), and the client that calls
/// them with the group's token.
struct Entry {
    app_name: String,
    addresses: Arc<Vec<String>>,
    client: ExecutorClient,
    at: i64,
    /// Read again before the cache time is over (its executors changed).
    expired: bool,
    /// A background refresh of this expired entry is under way.
    refreshing: bool,
}

/// Every group's addresses as dispatch last read them. An entry older than `ttl` is still
/// used while a background task reads the new list: dispatch waits for the database only
/// for a group never read, or whose executors just changed.
pub(crate) struct AddressCache {
    store: Arc<dyn Store>,
    /// The client with the global token; a group with its own token gets a copy with it.
    client: ExecutorClient,
    clock: Clock,
    ttl_ms: i64,
    dead_after_ms: i64,
    groups: Mutex<HashMap<i64, Entry>>,
}

impl AddressCache {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        client: ExecutorClient,
        clock: Clock,
        ttl: Duration,
        dead_after: Duration,
    ) -> Self {
        AddressCache {
            store,
            client,
            clock,
            ttl_ms: ttl.as_millis() as i64,
            dead_after_ms: dead_after.as_millis() as i64,
            groups: Mutex::new(HashMap::new()),
        }
    }

    /// A group's live addresses and the client that calls them with the group's token.
    pub(crate) async fn executors(
        self: &Arc<Self>,
        group_id: i64,
    ) -> Result<(Arc<Vec<String>>, ExecutorClient), Error> {
        // The list to fall back on when a read that must be waited for fails.
        let fallback = {
            let now = self.clock.now_ms();
            let mut groups = self.groups.lock().expect("groups lock");
            match groups.get_mut(&group_id) {
                // A clock set back makes the entry old, not young for longer.
                Some(c) if !c.expired && (0..self.ttl_ms).contains(&(now - c.at)) => {
                    return Ok((c.addresses.clone(), c.client.clone()));
                }
                // Its executors changed: read now.
                Some(c) if c.expired => Some((c.addresses.clone(), c.client.clone())),
                // Merely old: keep using it while a background task reads the new list.
                Some(c) => {
                    if !c.refreshing {
                        c.refreshing = true;
                        let cache = self.clone();
                        tokio::spawn(async move { cache.refresh(group_id).await });
                    }
                    return Ok((c.addresses.clone(), c.client.clone()));
                }
                None => None,
            }
        };
        // A database that hangs must not stall dispatch for long.
        let read = match tokio::time::timeout(ADDRESS_REFRESH_TIMEOUT, self.load(group_id)).await {
            Ok(result) => result,
            Err(_) => Err(Error::Unavailable(
                "the registry did not answer in time".to_owned(),
            )),
        };
        match (read, fallback) {
            (Ok(addresses), _) => Ok(addresses),
            (Err(e @ (Error::Store(_) | Error::Unavailable(_))), Some(last)) => {
                debug!(group_id, error = %e, "registry unreachable; using the last known addresses");
                Ok(last)
            }
            (Err(e), _) => Err(e),
        }
    }

    /// An executor of `app_name` beat: a group that does not list it yet reads the registry
    /// again (in the background), so a new executor is routable at once. A beat of a known
    /// executor changes nothing, and above all does not empty the cache: dispatch would then
    /// wait for the database at every beat.
    pub(crate) fn executor_seen(&self, app_name: &str, address: &str) {
        let mut groups = self.groups.lock().expect("groups lock");
        for g in groups.values_mut() {
            if g.app_name == app_name && !g.addresses.iter().any(|a| a == address) {
                g.expired = true;
            }
        }
    }

    /// An executor of `app_name` deregistered: it leaves every cached list at once, so no run
    /// goes to it from now on; the lists are then read again in the background.
    pub(crate) fn executor_gone(&self, app_name: &str, address: &str) {
        let mut groups = self.groups.lock().expect("groups lock");
        for g in groups.values_mut() {
            if g.app_name == app_name {
                let kept: Vec<String> = g
                    .addresses
                    .iter()
                    .filter(|a| *a != address)
                    .cloned()
                    .collect();
                g.addresses = Arc::new(kept);
                g.expired = true;
            }
        }
    }

    /// Forgets the cached list of one group (it changed or was deleted).
    pub(crate) fn forget(&self, group_id: i64) {
        self.groups.lock().expect("groups lock").remove(&group_id);
    }

    /// Forgets every group's list (the registry was swept).
    pub(crate) fn clear(&self) {
        self.groups.lock().expect("groups lock").clear();
    }

    async fn refresh(&self, group_id: i64) {
        if let Err(e) = self.load(group_id).await {
            debug!(group_id, error = %e, "address refresh failed; the last list stays");
            if let Some(c) = self.groups.lock().expect("groups lock").get_mut(&group_id) {
                c.refreshing = false;
            }
        }
    }

    /// Reads a group's addresses from the database into the cache.
    async fn load(&self, group_id: i64) -> Result<(Arc<Vec<String>>, ExecutorClient), Error> {
        let group: Group = self.store.group_get(group_id).await?;
        let now = self.clock.now_ms();
        let alive_since = now - self.dead_after_ms;
        let addresses = Arc::new(live_addresses_since(&*self.store, &group, alive_since).await?);
        let client = self.client.for_group(&group);
        self.groups.lock().expect("groups lock").insert(
            group_id,
            Entry {
                app_name: group.app_name,
                addresses: addresses.clone(),
                client: client.clone(),
                at: now,
                expired: false,
                refreshing: false,
            },
        );
        Ok((addresses, client))
    }
}
