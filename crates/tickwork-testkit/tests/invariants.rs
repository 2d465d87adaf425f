//! The crate map's invariants (ARCHITECTURE.md), checked on the dependency graph that
//! `cargo metadata` reports and on the source tree, so that a change that breaks one fails the
//! test suite instead of only contradicting the document.
//!
//! The graph is the workspace's resolved one: features are unified across the workspace, so a
//! crate can appear to reach more than it would alone, never less. Only normal dependencies
//! count; dev-dependencies are free. (That tickwork-serve knows neither the admin nor the
//! executor needs no test: both depend on it, and cargo refuses a cycle.)

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Crates that do IO or bring an async runtime: the pure crates must not reach any of them.
const IO_CRATES: [&str; 5] = ["tokio", "sqlx", "axum", "reqwest", "hyper"];

/// The workspace's root folder (this crate lives in `crates/tickwork-testkit`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/<name> has a workspace root above it")
        .to_path_buf()
}

/// The workspace as `cargo metadata` sees it, reduced to what the checks need.
struct Workspace {
    /// Package id -> package name, for every package in the graph.
    names: BTreeMap<String, String>,
    /// Package id -> ids of its normal (non-dev, non-build) dependencies.
    normal_deps: BTreeMap<String, Vec<String>>,
    /// The workspace members' package JSON, by name.
    members: BTreeMap<String, Value>,
}

impl Workspace {
    fn load() -> Workspace {
        // `CARGO` is the cargo that runs the tests; a plain `cargo` otherwise.
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        // The graph for this machine only: the full one needs the sources of every platform's
        // crates (Windows ones included), which a Linux build never downloads.
        let version = Command::new(&cargo)
            .arg("-vV")
            .output()
            .expect("cargo -vV runs");
        let version = String::from_utf8_lossy(&version.stdout);
        let host = version
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .expect("cargo -vV names the host");
        let output = Command::new(&cargo)
            .args(["metadata", "--format-version", "1", "--locked"])
            .args(["--filter-platform", host, "--manifest-path"])
            .arg(workspace_root().join("Cargo.toml"))
            .output()
            .expect("cargo metadata runs");
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let meta: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON");

        let mut names = BTreeMap::new();
        for package in meta["packages"].as_array().expect("packages") {
            names.insert(str_of(&package["id"]), str_of(&package["name"]));
        }
        let member_ids: BTreeSet<String> = meta["workspace_members"]
            .as_array()
            .expect("workspace_members")
            .iter()
            .map(str_of)
            .collect();
        let members = meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .filter(|p| member_ids.contains(&str_of(&p["id"])))
            .map(|p| (str_of(&p["name"]), p.clone()))
            .collect();

        let mut normal_deps = BTreeMap::new();
        for node in meta["resolve"]["nodes"].as_array().expect("resolve.nodes") {
            let deps = node["deps"]
                .as_array()
                .expect("deps")
                .iter()
                .filter(|dep| {
                    // `kind` is null for a normal dependency.
                    dep["dep_kinds"]
                        .as_array()
                        .expect("dep_kinds")
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|dep| str_of(&dep["pkg"]))
                .collect();
            normal_deps.insert(str_of(&node["id"]), deps);
        }
        Workspace {
            names,
            normal_deps,
            members,
        }
    }

    fn id_of(&self, member: &str) -> String {
        str_of(
            &self
                .members
                .get(member)
                .unwrap_or_else(|| panic!("{member} is a member"))["id"],
        )
    }

    /// Every package `member` reaches through normal dependencies, with one path to each
    /// (`a -> b -> c`), so that a failure says how the crate got there.
    fn reachable(&self, member: &str) -> BTreeMap<String, String> {
        let root = self.id_of(member);
        let mut paths: BTreeMap<String, String> = BTreeMap::new();
        let mut seen = BTreeSet::from([root.clone()]);
        let mut queue = vec![(root, member.to_string())];
        while let Some((id, path)) = queue.pop() {
            for dep in &self.normal_deps[&id] {
                if seen.insert(dep.clone()) {
                    let name = &self.names[dep];
                    let dep_path = format!("{path} -> {name}");
                    paths
                        .entry(name.clone())
                        .or_insert_with(|| dep_path.clone());
                    queue.push((dep.clone(), dep_path));
                }
            }
        }
        paths
    }

    /// `member`'s direct normal dependencies, by name (as its manifest declares them).
    fn direct_normal_deps(&self, member: &str) -> BTreeSet<String> {
        self.members[member]["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|dep| dep["kind"].is_null())
            .map(|dep| str_of(&dep["name"]))
            .collect()
    }

    /// Members with a library target (the binaries `tickwork` and `tickwork-bench` have none).
    fn library_members(&self) -> Vec<&str> {
        self.members
            .iter()
            .filter(|(_, p)| {
                p["targets"].as_array().expect("targets").iter().any(|t| {
                    t["kind"]
                        .as_array()
                        .expect("kind")
                        .iter()
                        .any(|k| k == "lib")
                })
            })
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The paths by which `member` reaches any of `forbidden`.
    fn violations(&self, member: &str, forbidden: &[&str]) -> Vec<String> {
        self.reachable(member)
            .into_iter()
            .filter(|(name, _)| forbidden.contains(&name.as_str()))
            .map(|(_, path)| path)
            .collect()
    }
}

fn str_of(value: &Value) -> String {
    value.as_str().expect("a string").to_string()
}

fn assert_none(rule: &str, violations: &[String]) {
    assert!(
        violations.is_empty(),
        "invariant broken: {rule} (ARCHITECTURE.md, crate map); found:\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn core_reaches_no_io_crate() {
    let ws = Workspace::load();
    assert_none(
        "tickwork-core knows nothing about SQL, HTTP or async runtimes",
        &ws.violations("tickwork-core", &IO_CRATES),
    );
}

#[test]
fn protocol_depends_only_on_core_and_serde() {
    let ws = Workspace::load();
    // Core for the names, serde for the wire, thiserror for the crate's one error enum.
    let allowed = ["tickwork-core", "serde", "serde_json", "thiserror"];
    let mut violations: Vec<String> = ws
        .direct_normal_deps("tickwork-protocol")
        .into_iter()
        .filter(|dep| !allowed.contains(&dep.as_str()))
        .map(|dep| {
            format!(
                "tickwork-protocol -> {dep} (allowed: {})",
                allowed.join(", ")
            )
        })
        .collect();
    violations.extend(ws.violations("tickwork-protocol", &IO_CRATES));
    assert_none(
        "tickwork-protocol depends only on tickwork-core (and serde); no IO",
        &violations,
    );
}

#[test]
fn executor_and_client_reach_neither_store_nor_admin() {
    let ws = Workspace::load();
    let forbidden = ["tickwork-store", "tickwork-admin", "sqlx"];
    let mut violations = ws.violations("tickwork-executor", &forbidden);
    violations.extend(ws.violations("tickwork-client", &forbidden));
    assert_none(
        "tickwork-executor and tickwork-client talk to the admin over the wire only, \
         knowing nothing about SQL or the admin's internals",
        &violations,
    );
}

#[test]
fn only_test_suites_depend_on_testkit() {
    let ws = Workspace::load();
    // The crates that are test suites as a whole: their library is their harness.
    let suites = ["tickwork-it", "tickwork-console-tests", "tickwork-testkit"];
    let violations: Vec<String> = ws
        .members
        .keys()
        .filter(|member| !suites.contains(&member.as_str()))
        .flat_map(|member| ws.violations(member, &["tickwork-testkit"]))
        .collect();
    assert_none(
        "test support is for tests: tickwork-testkit is a dev-dependency, except of the \
         crates that are test suites",
        &violations,
    );
}

#[test]
fn library_crates_do_not_depend_on_anyhow() {
    let ws = Workspace::load();
    let violations: Vec<String> = ws
        .library_members()
        .into_iter()
        .filter(|member| ws.direct_normal_deps(member).contains("anyhow"))
        .map(|member| format!("{member} -> anyhow"))
        .collect();
    assert_none(
        "library crates have one thiserror enum each; anyhow only in binaries \
         (dev-dependencies may use it)",
        &violations,
    );
}

#[test]
fn every_member_uses_the_workspace_lints() {
    let ws = Workspace::load();
    let offenders: Vec<String> = ws
        .members
        .iter()
        .filter(|(_, package)| {
            let manifest = std::fs::read_to_string(str_of(&package["manifest_path"]))
                .expect("a readable manifest");
            !manifest.contains("\n[lints]\nworkspace = true\n")
        })
        .map(|(name, _)| name.clone())
        .collect();
    assert!(
        offenders.is_empty(),
        "every crate opts into the workspace lints (`[lints]` then `workspace = true` in its \
         Cargo.toml); these do not: {}",
        offenders.join(", ")
    );
}

#[test]
fn every_rs_file_starts_with_a_doc_line() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in ["crates", "fuzz"] {
        rs_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 50,
        "found only {} .rs files under {}",
        files.len(),
        root.display()
    );
    let offenders: Vec<String> = files
        .iter()
        .filter(|file| {
            let text = std::fs::read_to_string(file).expect("a readable .rs file");
            !text.starts_with("//!")
        })
        .map(|file| {
            file.strip_prefix(&root)
                .unwrap_or(file)
                .display()
                .to_string()
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "every .rs file starts with a `//!` line saying what it is; these do not:\n  {}",
        offenders.join("\n  ")
    );
}

/// Every `.rs` file under `dir`, build output and hidden folders left out.
fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable folder") {
        let path = entry.expect("a folder entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rs_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The non-test sources of the library and binary crates: `src/` of each crate, with the
/// crates that are tests as a whole and `#[cfg(test)]`-only `tests.rs` files left out.
fn product_sources() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("the crates folder") {
        let krate = entry.expect("a folder entry").path();
        let name = krate.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, "tickwork-it" | "tickwork-console-tests") {
            continue;
        }
        let src = krate.join("src");
        if src.is_dir() {
            rs_files(&src, &mut files);
        }
    }
    files.retain(|f| f.file_name().and_then(|n| n.to_str()) != Some("tests.rs"));
    assert!(files.len() > 50, "found only {} source files", files.len());
    files
}

#[test]
fn no_source_file_is_over_900_lines() {
    let root = workspace_root();
    let offenders: Vec<String> = product_sources()
        .iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(file)
                .expect("readable")
                .lines()
                .count();
            (lines > 900).then(|| {
                let shown = file.strip_prefix(&root).unwrap_or(file).display();
                format!("{shown}: {lines} lines")
            })
        })
        .collect();
    assert_none(
        "no non-test source file has more than 900 lines",
        &offenders,
    );
}

/// Methods per type, counted from `impl Type {` blocks (trait impls are the trait's, not the
/// type's): a line-based count of `fn` items at the first indentation level.
fn methods_per_type(files: &[PathBuf]) -> HashMap<String, usize> {
    let mut count = HashMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("readable");
        let mut current: Option<String> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("impl") {
                current = (!line.contains(" for ")).then(|| impl_type(rest)).flatten();
            } else if line.starts_with('}') {
                current = None;
            } else if let Some(ty) = &current
                && is_method(line)
            {
                *count.entry(ty.clone()).or_insert(0) += 1;
            }
        }
    }
    count
}

/// `Type` of the text after `impl` in `impl<T: X> Type<'a, T> {`.
fn impl_type(rest: &str) -> Option<String> {
    let rest = rest.trim_start();
    let rest = if rest.starts_with('<') {
        let mut depth = 0;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        })?;
        rest[end + 1..].trim_start()
    } else {
        rest
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

fn is_method(line: &str) -> bool {
    let Some(item) = line.strip_prefix("    ") else {
        return false;
    };
    let mut words = item.split_whitespace();
    let mut word = words.next().unwrap_or("");
    if word.starts_with("pub") {
        word = words.next().unwrap_or("");
    }
    while matches!(word, "const" | "async" | "unsafe") {
        word = words.next().unwrap_or("");
    }
    word == "fn"
}

#[test]
fn no_type_has_more_than_40_methods() {
    let offenders: Vec<String> = methods_per_type(&product_sources())
        .into_iter()
        .filter(|&(_, n)| n > 40)
        .map(|(ty, n)| format!("{ty}: {n} methods"))
        .collect();
    assert_none("no type has more than 40 methods", &offenders);
}

#[test]
fn method_count_reads_impl_blocks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("sample.rs");
    std::fs::write(
        &file,
        "//! sample\nimpl<T: Clone> Wide<'_, T> {\n    pub fn a(&self) {}\n    pub(crate) async fn b(&self) {}\n    const fn c() {}\n}\nimpl Display for Wide {\n    fn fmt(&self) {}\n}\n",
    )
    .expect("written");
    let count = methods_per_type(&[file]);
    assert_eq!(count.get("Wide"), Some(&3));
    assert_eq!(count.len(), 1);
}
