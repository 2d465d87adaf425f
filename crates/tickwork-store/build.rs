//! Rebuilds the crate when a migration changes: `migrate!` embeds the files at build time but
//! does not tell cargo to watch them.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
