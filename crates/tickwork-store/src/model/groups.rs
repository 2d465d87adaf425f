//! Executor groups and the registry of their executors.

use super::AddressMode;

/// An executor group (XXL: job group), keyed by its `app_name`.
#[derive(Clone, PartialEq, Eq)]
pub struct Group {
    pub id: i64,
    /// The AppName executors register under. Unique.
    pub app_name: String,
    pub title: String,
    pub address_mode: AddressMode,
    /// The manual address list (used when `address_mode` is manual).
    pub addresses: Vec<String>,
    /// The group's own executor access token; `None`: the admin's global one applies.
    /// Kept as it is because the admin sends it to the group's executors.
    pub access_token: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

// By hand, so that a logged group never shows its token.
impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("id", &self.id)
            .field("app_name", &self.app_name)
            .field("title", &self.title)
            .field("address_mode", &self.address_mode)
            .field("addresses", &self.addresses)
            .field("access_token", &self.access_token.as_ref().map(|_| "***"))
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

/// Sets (or clears) a group's own access token.
#[derive(Clone, PartialEq, Eq)]
pub struct GroupTokenSet {
    pub id: i64,
    /// The new token; `None` goes back to the global token.
    pub token: Option<String>,
    pub now: i64,
}

impl std::fmt::Debug for GroupTokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupTokenSet")
            .field("id", &self.id)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("now", &self.now)
            .finish()
    }
}

/// The executor group a run was fired for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunGroup {
    pub run_id: i64,
    pub group_id: i64,
}

/// A group to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupNew {
    pub app_name: String,
    pub title: String,
    pub address_mode: AddressMode,
    pub addresses: Vec<String>,
    pub now: i64,
}

/// New values for every editable field of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupUpdate {
    pub id: i64,
    pub app_name: String,
    pub title: String,
    pub address_mode: AddressMode,
    pub addresses: Vec<String>,
    pub now: i64,
}

/// One executor heartbeat (`/api/registry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryBeat {
    pub app_name: String,
    pub address: String,
    pub now: i64,
}

/// One registry row's identity (`/api/registryRemove`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryKey {
    pub app_name: String,
    pub address: String,
}

/// The live executors of one app: those that beat at or after `alive_since`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveQuery {
    pub app_name: String,
    pub alive_since: i64,
}

/// One registry row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    pub app_name: String,
    pub address: String,
    pub updated_at: i64,
}
