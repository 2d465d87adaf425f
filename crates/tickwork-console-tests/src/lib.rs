//! The harness of the console's browser tests: a real admin (SQLite in a fresh folder) serving
//! HTTP on a free port, a real executor with script jobs enabled, `chromedriver` on a free
//! port driving headless Chromium with a fresh profile (a testkit process: its group, the
//! browser included, is killed when the test ends), helpers that wait on page state with
//! deadlines, and screenshots saved under the target folder.
//!
//! When Chromium or chromedriver is missing, [`Console::start`] fails under `CI` and returns
//! `None` after a loud SKIP banner otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use thirtyfour::prelude::*;
use tickwork_admin::config::ConfigFile;
use tickwork_admin::{Running, Service};
use tickwork_executor::RunningExecutor;
use tickwork_testkit::process::Process;
use tickwork_testkit::wait::{Outcome, Wait};
use tokio_util::sync::CancellationToken;

/// The first admin's password in every test.
pub const ADMIN_PASSWORD: &str = "console-test-admin-pw";
/// The app name of the test executor.
pub const APP: &str = "console-test";
/// How long any wait on page state may take.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Writes a line to the real stderr (shown by the test runner).
pub fn report(line: impl AsRef<str>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{}", line.as_ref());
}

fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The folder of the screenshots: `<target>/console-screenshots`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            // The test binary lives in <target>/<profile>/deps.
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.parent()?.to_path_buf())
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("console-screenshots")
}

/// Everything one browser test runs against.
pub struct Console {
    pub base: String,
    pub admin: Service,
    store: std::sync::Arc<dyn tickwork_store::Store>,
    pub driver: WebDriver,
    pub executor: RunningExecutor,
    running: Option<Running>,
    stop: CancellationToken,
    chromedriver: Process,
    shots: Vec<PathBuf>,
    prefix: String,
    _dir: tempfile::TempDir,
}

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

impl Console {
    /// Starts admin, executor, chromedriver and Chromium; `None` (after a SKIP banner) when
    /// the browser is not installed and `CI` is not set.
    pub async fn start(test: &str) -> Option<Console> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let chromium = find_binary(&["chromium", "chromium-browser", "google-chrome"]);
        let chromedriver = find_binary(&["chromedriver"]);
        let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
            let msg =
                "chromium and chromedriver are needed (apt-get install chromium chromium-driver)";
            if std::env::var_os("CI").is_some() {
                panic!("{msg} (CI is set: a failure)");
            }
            let bar = "!".repeat(78);
            report(format!("\n{bar}\nSKIPPED {test}: {msg}\n{bar}"));
            return None;
        };

        let dir = tempfile::tempdir().expect("temporary folder");
        let db = dir.path().join("tw.db");
        let toml = format!(
            r#"
listen = "127.0.0.1:0"
database_url = "sqlite://{}?mode=rwc"
data_dir = "{}"
access_token = "console-test-access"
api_token = "console-test-api"
default_time_zone = "UTC"

[scheduler]
claim_interval_ms = 200
lookahead_ms = 2000

[auth]
admin_password = "{ADMIN_PASSWORD}"
"#,
            db.display(),
            dir.path().join("data").display()
        );
        let file: ConfigFile = toml::from_str(&toml).expect("admin toml");
        let config = file.into_config().expect("admin config");
        let store = tickwork_store::connect(&config.database_url, &Default::default())
            .await
            .expect("open the database");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listener");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let running = tickwork_admin::start(config, store.clone())
            .await
            .expect("admin start");
        let admin = running.admin.service.clone();
        let stop = CancellationToken::new();
        tokio::spawn(tickwork_admin::http::serve(
            running.admin.clone(),
            listener,
            stop.clone(),
        ));

        let executor = tickwork_executor::Executor::builder(APP)
            .admin_addresses(&base)
            .access_token("console-test-access")
            .listen("127.0.0.1:0".parse().expect("address"))
            .log_folder(dir.path().join("executor-logs"))
            .scripts_enabled(true)
            .registry_interval(Duration::from_secs(1))
            .start()
            .await
            .expect("executor start");

        let addr = free_port();
        let mut command = Command::new(&chromedriver);
        command.arg(format!("--port={}", addr.port()));
        let child = Process::start("chromedriver", command);
        child.wait_for_port(addr, DEADLINE).await;
        let driver_url = format!("http://{addr}");
        let mut caps = DesiredCapabilities::chrome();
        caps.set_binary(&chromium.to_string_lossy())
            .expect("binary");
        for arg in [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1280,900",
            "--lang=en-US",
        ] {
            caps.add_arg(arg).expect("chrome arg");
        }
        let profile = dir.path().join("chrome-profile");
        caps.add_arg(&format!("--user-data-dir={}", profile.display()))
            .expect("chrome arg");
        // A session may be refused while chromedriver is still setting up.
        let driver = Wait::new("a chromedriver session", DEADLINE)
            .every(Duration::from_millis(200))
            .try_until(|| WebDriver::new(&driver_url, caps.clone()))
            .await
            .unwrap_or_else(|e| panic!("{e}; chromedriver's output:\n{}", child.tail(50)));
        let shots = screenshot_dir();
        std::fs::create_dir_all(&shots).expect("screenshot folder");
        Some(Console {
            base,
            admin,
            store,
            driver,
            executor,
            running: Some(running),
            stop,
            chromedriver: child,
            shots: Vec::new(),
            prefix: test.to_owned(),
            _dir: dir,
        })
    }

    /// Opens a path of the console.
    pub async fn open(&self, path: &str) {
        self.driver
            .goto(format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("open {path}: {e}"));
    }

    /// Signs in through the login page.
    pub async fn login(&self, username: &str, password: &str) {
        self.open("/login").await;
        self.fill("#username", username).await;
        self.fill("#password", password).await;
        self.click("#login-submit").await;
        self.wait_css("#who").await;
    }

    /// Signs out with the header's button.
    pub async fn logout(&self) {
        self.click("#logout").await;
        self.wait_css("#login-submit").await;
    }

    /// The element matching `css`, waiting for it to appear; at the deadline saves a
    /// screenshot of the page it waited on and panics.
    pub async fn wait_css(&self, css: &str) -> WebElement {
        let found = self
            .driver
            .query(By::Css(css))
            .wait(DEADLINE, Duration::from_millis(100))
            .first()
            .await;
        match found {
            Ok(e) => e,
            Err(e) => {
                let _ = self.screenshot(&format!("timeout-{}", slug(css))).await;
                panic!("no element {css} within {DEADLINE:?}: {e}")
            }
        }
    }

    /// Waits until `check` holds (a `bool`, an `Option` or a `Result` whose error is what it
    /// saw), re-evaluated at most every 200 ms; at the deadline saves a screenshot and panics
    /// naming `what` and what the last check saw.
    pub async fn wait_until<O, F, Fut>(&self, what: &str, check: F) -> O::Value
    where
        O: Outcome,
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = O>,
    {
        let waited = Wait::new(what, DEADLINE)
            .every(Duration::from_millis(200))
            .try_until(check)
            .await;
        match waited {
            Ok(value) => value,
            Err(timeout) => {
                let _ = self.screenshot(&format!("timeout-{}", slug(what))).await;
                panic!("{timeout}");
            }
        }
    }

    /// The text of the element matching `css`, or "" when there is none.
    pub async fn text(&self, css: &str) -> String {
        match self.driver.find(By::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Whether an element matches `css` now.
    pub async fn exists(&self, css: &str) -> bool {
        self.driver
            .find_all(By::Css(css))
            .await
            .map(|v| !v.is_empty())
            .unwrap_or(false)
    }

    pub async fn fill(&self, css: &str, value: &str) {
        let e = self.wait_css(css).await;
        e.clear().await.expect("clear");
        e.send_keys(value).await.expect("type");
    }

    pub async fn select(&self, css: &str, value: &str) {
        let e = self.wait_css(css).await;
        let option = e
            .find(By::Css(format!("option[value='{value}']")))
            .await
            .unwrap_or_else(|err| panic!("{css} has no option {value}: {err}"));
        option.click().await.expect("select");
    }

    pub async fn click(&self, css: &str) {
        self.wait_css(css).await.click().await.expect("click");
    }

    /// Clicks a button that submits a form and waits until the browser has left the page (its
    /// root element went stale). A banner or element read next is the answer's, never one the
    /// old page still showed.
    pub async fn submit(&self, css: &str) {
        let old = self.root().await;
        self.click(css).await;
        self.left(&old, css).await;
    }

    /// [`Console::submit`] for a button that asks "are you sure?": accepts, then waits for the
    /// answer's page.
    pub async fn submit_confirmed(&self, css: &str) {
        let old = self.root().await;
        self.click_confirmed(css).await;
        self.left(&old, css).await;
    }

    async fn root(&self) -> WebElement {
        self.driver
            .find(By::Tag("html"))
            .await
            .expect("the page's root element")
    }

    async fn left(&self, old: &WebElement, css: &str) {
        self.wait_until(&format!("a new page after {css}"), || async {
            matches!(old.is_present().await, Ok(false))
        })
        .await;
    }

    /// Clicks a button that asks "are you sure?" and accepts.
    pub async fn click_confirmed(&self, css: &str) {
        self.click(css).await;
        self.wait_until(&format!("a confirmation after {css}"), || {
            self.driver.accept_alert()
        })
        .await;
    }

    /// Saves a PNG of the page as `<test>-<name>.png` and prints its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let path = screenshot_dir().join(format!("{}-{}.png", self.prefix, slug(name)));
        let png = self.driver.screenshot_as_png().await.expect("screenshot");
        std::fs::write(&path, png).expect("write screenshot");
        report(format!("screenshot: {}", path.display()));
        path
    }

    /// Records a screenshot's path for the summary.
    pub async fn shot(&mut self, name: &str) {
        let p = self.screenshot(name).await;
        self.shots.push(p);
    }

    /// Stops the browser, the executor and the admin.
    pub async fn finish(mut self) {
        report(format!(
            "{}: {} screenshots in {}",
            self.prefix,
            self.shots.len(),
            screenshot_dir().display()
        ));
        let _ = self.driver.clone().quit().await;
        self.chromedriver.kill().await;
        let _ = self.executor.shutdown_and_wait().await;
        self.stop.cancel();
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        self.store.close().await;
    }
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}
