//! Bundles the console's script editor (CodeMirror 6, `editor/`) into one JavaScript file in
//! `OUT_DIR` with esbuild, both from the npm registry at the exact versions of
//! `editor/package-lock.json` (`npm ci`), and names it by a hash of its content
//! (`TICKWORK_EDITOR_JS`, served under `/assets/`), so browsers never keep a stale one.
//!
//! Runs only when the package files, the editor's source or this file change; node_modules and
//! the bundle live in `OUT_DIR`, never in the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The editor's source files, copied next to the installed packages to be bundled there.
const SOURCES: &[&str] = &["src/editor.js"];

fn main() {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let editor = manifest.join("editor");
    println!("cargo:rerun-if-changed=build.rs");
    for f in ["package.json", "package-lock.json"].iter().chain(SOURCES) {
        println!("cargo:rerun-if-changed={}", editor.join(f).display());
    }

    let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
    let node = if cfg!(windows) { "node.exe" } else { "node" };
    run(Command::new(node).arg("--version"), "node --version");
    run(Command::new(npm).arg("--version"), "npm --version");

    let work = PathBuf::from(env("OUT_DIR")).join("editor");
    std::fs::create_dir_all(work.join("src")).unwrap_or_else(|e| fail(&format!("{e}")));
    for f in ["package.json", "package-lock.json"].iter().chain(SOURCES) {
        copy_if_changed(&editor.join(f), &work.join(f));
    }

    // Exactly the locked packages (npm ci checks the lock against package.json); their install
    // scripts are not run: esbuild's binary is the platform package npm installs beside it.
    run(
        Command::new(npm)
            .args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--prefer-offline",
                "--loglevel=error",
            ])
            .current_dir(&work),
        "npm ci",
    );

    let bundle = work.join("editor.js");
    run(
        Command::new(node)
            .arg(work.join("node_modules/esbuild/bin/esbuild"))
            .args([
                "src/editor.js",
                "--bundle",
                "--minify",
                "--format=iife",
                "--target=es2020",
                "--legal-comments=none",
                "--log-level=warning",
                "--banner:js=/*! Tickwork script editor. Bundles CodeMirror 6 and Lezer \
                 (MIT, Marijn Haverbeke and others), style-mod, w3c-keyname and crelt (MIT). */",
            ])
            .arg(format!("--outfile={}", bundle.display()))
            .current_dir(&work),
        "esbuild",
    );

    let js = std::fs::read(&bundle).unwrap_or_else(|e| fail(&format!("no bundle: {e}")));
    let name = format!("editor-{:016x}.js", fnv1a(&js));
    println!("cargo:rustc-env=TICKWORK_EDITOR_JS={name}");
    println!(
        "cargo:rustc-env=TICKWORK_EDITOR_JS_PATH={}",
        bundle.display()
    );
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| fail(&format!("{name} is not set")))
}

/// Copies `from` to `to` unless `to` already holds the same bytes (npm ci reinstalls
/// everything when the lock file looks newer).
fn copy_if_changed(from: &Path, to: &Path) {
    let new = std::fs::read(from)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", from.display())));
    if std::fs::read(to).ok().as_deref() != Some(&new[..]) {
        std::fs::write(to, new)
            .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", to.display())));
    }
}

fn run(cmd: &mut Command, what: &str) {
    match cmd.output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => fail(&format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fail(&format!(
            "{what}: Node.js and npm are needed to build the console's script editor \
             (Debian: apt-get install nodejs npm), and the npm registry must be reachable \
             ({e})"
        )),
        Err(e) => fail(&format!("{what} could not start: {e}")),
    }
}

/// A 64-bit FNV-1a hash: enough to tell one bundle from the next in its file name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Stops the build with `msg` (cargo shows the script's stderr), without a panic's backtrace.
fn fail(msg: &str) -> ! {
    eprintln!("error: tickwork-admin's build: {msg}");
    std::process::exit(1);
}
