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
    let live = live_executors(store, group, now, dead_after_ms).await?;
    Ok(live.into_iter().map(|(address, _)| address).collect())
}

/// A group's live addresses at `now`, each with the last instant it stays live: its last
/// registry beat plus `dead_after_ms`, or [`NEVER_DEAD`] for an address of a manual list.
async fn live_executors(
    store: &dyn Store,
    group: &Group,
    now: i64,
    dead_after_ms: i64,
) -> Result<Vec<(String, i64)>, Error> {
    if group.address_mode == AddressMode::Manual {
        return Ok(group
            .addresses
            .iter()
            .map(|a| (a.clone(), NEVER_DEAD))
            .collect());
    }
    let entries = store
        .registry_live_entries(LiveQuery {
            app_name: group.app_name.clone(),
            alive_since: now - dead_after_ms,
        })
        .await?;
    Ok(entries
        .into_iter()
        .map(|e| (e.address, e.updated_at.saturating_add(dead_after_ms)))
        .collect())
}

/// The "live until" of an address that does not come from the registry.
const NEVER_DEAD: i64 = i64::MAX;

/// A group's live addresses, read at `at` (the scheduler's clock), and the client that calls
/// them with the group's token.
struct Entry {
    app_name: String,
    addresses: Arc<Vec<String>>,
    /// For each address (same order), the last instant it is live by the beat that was read.
    live_until: Vec<i64>,
    /// The earliest of `live_until`: until then every address is live, and after it the list
    /// must not be offered as it is, whatever the cache time.
    all_live_until: i64,
    /// Shared with every dispatch that uses it: a clone of the client itself copies the
    /// group's token and app name, on every call.
    client: Arc<ExecutorClient>,
    at: i64,
    /// Read again before the cache time is over (its executors changed).
    expired: bool,
    /// A background refresh of this expired entry is under way.
    refreshing: bool,
}

impl Entry {
    fn new(
        app_name: String,
        live: Vec<(String, i64)>,
        client: Arc<ExecutorClient>,
        at: i64,
    ) -> Self {
        let (addresses, live_until): (Vec<String>, Vec<i64>) = live.into_iter().unzip();
        Entry {
            app_name,
            addresses: Arc::new(addresses),
            all_live_until: live_until.iter().copied().min().unwrap_or(NEVER_DEAD),
            live_until,
            client,
            at,
            expired: false,
            refreshing: false,
        }
    }

    /// The addresses still live at `now` by the beats this entry read.
    fn live_at(&self, now: i64) -> Arc<Vec<String>> {
        if now <= self.all_live_until {
            return self.addresses.clone();
        }
        let live = self
            .addresses
            .iter()
            .zip(&self.live_until)
            .filter(|(_, until)| now <= **until)
            .map(|(a, _)| a.clone())
            .collect();
        Arc::new(live)
    }

    /// Keeps the addresses (and their instants) that `keep` accepts.
    fn retain(&mut self, mut keep: impl FnMut(&str, &mut i64) -> bool) {
        let mut addresses = Vec::with_capacity(self.addresses.len());
        let mut live_until = Vec::with_capacity(self.addresses.len());
        for (a, mut until) in self.addresses.iter().zip(self.live_until.iter().copied()) {
            if keep(a, &mut until) {
                addresses.push(a.clone());
                live_until.push(until);
            }
        }
        self.addresses = Arc::new(addresses);
        self.all_live_until = live_until.iter().copied().min().unwrap_or(NEVER_DEAD);
        self.live_until = live_until;
    }
}

/// Every group's addresses as dispatch last read them. An entry older than `ttl` is still
/// used while a background task reads the new list: dispatch waits for the database only
/// for a group never read, whose executors just changed, or one of whose executors has not
/// beaten for longer than the registry's dead-after as far as the entry knows. An address is
/// never offered past its last known beat plus dead-after, whatever `ttl` says: the registry
/// decides who is alive, not the cache.
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
    ) -> Result<(Arc<Vec<String>>, Arc<ExecutorClient>), Error> {
        // The list to fall back on when a read that must be waited for fails.
        let fallback = {
            let now = self.clock.now_ms();
            let mut groups = self.groups.lock().expect("groups lock");
            match groups.get_mut(&group_id) {
                // A clock set back makes the entry old, not young for longer.
                Some(c)
                    if !c.expired
                        && now <= c.all_live_until
                        && (0..self.ttl_ms).contains(&(now - c.at)) =>
                {
                    return Ok((c.addresses.clone(), c.client.clone()));
                }
                // Its executors changed, or one of them may have died: read now. Meanwhile
                // only the addresses live by the beats read may be offered.
                Some(c) if c.expired || now > c.all_live_until => {
                    Some((c.live_at(now), c.client.clone()))
                }
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
        let load = {
            let cache = self.clone();
            async move { cache.load(group_id).await }
        };
        let read = match super::bounded::wait_at_most(ADDRESS_REFRESH_TIMEOUT, load).await {
            Some(result) => result,
            None => Err(Error::Unavailable(
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

    /// An executor of `app_name` beat (recorded in the registry just now): a group that does
    /// not list it yet reads the registry again (in the background), so a new executor is
    /// routable at once. A group that lists it keeps it live from this beat on, and above
    /// all its cache is not emptied: dispatch would then wait for the database at every beat.
    pub(crate) fn executor_seen(&self, app_name: &str, address: &str) {
        let live_until = self.clock.now_ms().saturating_add(self.dead_after_ms);
        let mut groups = self.groups.lock().expect("groups lock");
        for g in groups.values_mut() {
            if g.app_name != app_name {
                continue;
            }
            if g.addresses.iter().any(|a| a == address) {
                g.retain(|a, until| {
                    // Not for a manual list, whose addresses never die.
                    if a == address && *until != NEVER_DEAD {
                        *until = (*until).max(live_until);
                    }
                    true
                });
            } else {
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
                g.retain(|a, _| a != address);
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
    async fn load(&self, group_id: i64) -> Result<(Arc<Vec<String>>, Arc<ExecutorClient>), Error> {
        let group: Group = self.store.group_get(group_id).await?;
        let now = self.clock.now_ms();
        let live = live_executors(&*self.store, &group, now, self.dead_after_ms).await?;
        let client = Arc::new(self.client.for_group(&group));
        let entry = Entry::new(group.app_name, live, client.clone(), now);
        let addresses = entry.addresses.clone();
        self.groups
            .lock()
            .expect("groups lock")
            .insert(group_id, entry);
        Ok((addresses, client))
    }
}
