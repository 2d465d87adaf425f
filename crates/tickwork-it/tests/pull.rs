//! Pull-mode executors: `tickwork executor --pull` listens on no port and dials the admin;
//! cron and manual runs, broadcast shards, live logs, kills, timeouts, credits and the drain
//! at SIGTERM all go over that one connection.

use std::collections::HashSet;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use tickwork_it::{AdminSettings, Api, Backend, Cluster, Run, WAIT, e2e, wait_until};

e2e!(a_pull_executor_with_no_port_runs_cron_manual_broadcast_kill_and_timeout);

/// The TCP ports `pid` listens on, from `/proc`: its socket inodes matched against the kernel's
/// tables of listening sockets.
fn listening_ports(pid: i32) -> Vec<String> {
    let mut inodes = HashSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the process's fds") {
        let Ok(target) = std::fs::read_link(fd.expect("fd").path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
        {
            inodes.insert(inode.to_owned());
        }
    }
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            // Column 3 is the state (0A = LISTEN), column 9 the inode.
            if cols.len() > 9 && cols[3] == "0A" && inodes.contains(cols[9]) {
                ports.push(cols[1].to_owned());
            }
        }
    }
    ports
}

async fn job(api: &Api, group: i64, fields: Value) -> i64 {
    let mut body = json!({ "group_id": group, "schedule_type": "NONE", "route_strategy": "FIRST" });
    for (k, v) in fields.as_object().expect("fields") {
        body[k] = v.clone();
    }
    api.create_job(body).await["id"].as_i64().expect("job id")
}

async fn log_of(api: &Api, run: i64) -> String {
    let log = api.get(&format!("/runs/{run}/log?from_line=1")).await;
    log["content"].as_str().unwrap_or_default().to_owned()
}

async fn a_pull_executor_with_no_port_runs_cron_manual_broadcast_kill_and_timeout(mut c: Cluster) {
    let api = c.start_admin().await;
    let group = api.create_group("pull-app").await;
    let a = c.start_pull_executor("pull-app", &[]).await;
    let b = c.start_pull_executor("pull-app", &[]).await;
    let mut both = vec![a.address.clone(), b.address.clone()];
    both.sort();
    api.wait_live(group, &both).await;
    for e in [&a, &b] {
        assert!(e.address.starts_with("pull://"), "{e:?}");
        let ports = listening_ports(c.executor_pid(e));
        assert!(ports.is_empty(), "a pull executor listens on {ports:?}");
    }

    // Cron: a fire every second reaches a pull executor.
    let cron = job(
        &api,
        group,
        json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "handler": "echo",
                "params": "tick", "start": true }),
    )
    .await;
    let runs = api.wait_runs_in(cron, "succeeded", 2).await;
    assert!(
        both.contains(&runs[0].executor_address.clone().unwrap()),
        "{runs:?}"
    );
    api.stop_job(cron).await;

    // Manual, to a chosen executor, with params.
    let echo = job(&api, group, json!({ "handler": "echo" })).await;
    let run = api
        .trigger(echo, Some("over the pull link"), Some(&b.address))
        .await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.state, "succeeded", "{run:?}");
    assert_eq!(run.address(), b.address, "{run:?}");
    assert_eq!(run.handle_msg(), "over the pull link", "{run:?}");

    // Broadcast: one run per executor, each told its shard; the log is read over the link.
    let shards = job(
        &api,
        group,
        json!({ "handler": "echo", "route_strategy": "SHARDING_BROADCAST" }),
    )
    .await;
    api.trigger(shards, Some("shards"), None).await;
    let runs: Vec<Run> = wait_until("two ended shards", WAIT, || async {
        let runs = api.runs(shards).await;
        (runs.len() >= 2 && runs.iter().all(Run::is_settled)).then_some(runs)
    })
    .await;
    let mut told = Vec::new();
    for r in &runs {
        assert_eq!(r.state, "succeeded", "{r:?}");
        let log = log_of(&api, r.id).await;
        let shard = (0..2)
            .find(|i| log.contains(&format!("(shard {i}/2)")))
            .unwrap_or_else(|| panic!("run {} was not told its shard: {log:?}", r.id));
        told.push((shard, r.address().to_owned()));
    }
    told.sort();
    assert_eq!(
        told,
        [(0, both[0].clone()), (1, both[1].clone())],
        "{runs:#?}"
    );

    // Kill: a long script, killed through the admin, ends killed.
    let long = job(
        &api,
        group,
        json!({ "glue_type": "GLUE_SHELL", "glue_source": "#!/bin/sh\necho started\nsleep 600\n" }),
    )
    .await;
    let run = api.trigger(long, None, Some(&a.address)).await;
    api.wait_dispatched(run.id).await;
    wait_until("the script to start", WAIT, || async {
        log_of(&api, run.id).await.contains("started").then_some(())
    })
    .await;
    let killed = api.post(&format!("/runs/{}/kill", run.id), json!({})).await;
    assert_eq!(killed["state"], "killed", "{killed}");

    // Timeout: the executor ends the run after its timeout.
    let slow = job(
        &api,
        group,
        json!({ "glue_type": "GLUE_SHELL", "glue_source": "#!/bin/sh\nsleep 600\n",
                "timeout_s": 1 }),
    )
    .await;
    let run = api.trigger(slow, None, Some(&a.address)).await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.state, "timed_out", "{run:?}");

    // SIGTERM: the executor tells the admin it drains (it leaves the live list at once),
    // finishes what it runs, and exits cleanly.
    let short = job(
        &api,
        group,
        json!({ "glue_type": "GLUE_SHELL", "glue_source": "#!/bin/sh\necho begun\nsleep 2\necho done\n" }),
    )
    .await;
    let run = api.trigger(short, None, Some(&a.address)).await;
    wait_until("the script to begin", WAIT, || async {
        log_of(&api, run.id).await.contains("begun").then_some(())
    })
    .await;
    c.signal_executor(&a, Signal::SIGTERM);
    api.wait_live(group, std::slice::from_ref(&b.address)).await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.state, "succeeded", "{run:?}");
    let status = c.wait_executor_exit(&a).await;
    assert!(
        status.success(),
        "the drained executor exited with {status}"
    );
    // Runs go to the one left.
    let run = api.trigger(echo, Some("after the drain"), None).await;
    let run = api.wait_final(run.id).await;
    assert_eq!(run.address(), b.address, "{run:?}");

    // The results came over the executors' connections, not by HTTP callbacks.
    let metrics = reqwest::get(format!("{}/metrics", api.base()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let results: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tickwork_pull_results_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pull results counter in {metrics}"));
    let mut succeeded = 0;
    for job in [cron, echo, shards, short] {
        succeeded += api
            .runs(job)
            .await
            .iter()
            .filter(|r| r.state == "succeeded")
            .count() as u64;
    }
    assert!(
        results >= succeeded,
        "{results} results over pull connections for {succeeded} succeeded runs"
    );
}

/// A pull executor with one slot: a second run waits for the first to end (its credit comes
/// back) and is then sent; one that cannot get a slot within the call's timeout fails with a
/// reason, and was never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_executor_is_sent_no_more_runs_than_its_slots() {
    tickwork_it::run(Backend::Sqlite, |mut c: Cluster| async move {
        c.settings = AdminSettings {
            extra_toml: "[dispatch]\nexecutor_timeout_ms = 3000\n",
            ..AdminSettings::default()
        };
        let api = c.start_admin().await;
        let group = api.create_group("slot-app").await;
        let e = c
            .start_pull_executor("slot-app", &["--pull-slots", "1"])
            .await;
        api.wait_live(group, std::slice::from_ref(&e.address)).await;
        let script = json!({ "glue_type": "GLUE_SHELL", "glue_source": "#!/bin/sh\nsleep 1\n" });
        let (a, b) = (
            job(&api, group, script.clone()).await,
            job(&api, group, script).await,
        );
        let first = api.trigger(a, None, None).await;
        let second = api.trigger(b, None, None).await;
        let first = api.wait_final(first.id).await;
        let second = api.wait_final(second.id).await;
        assert_eq!(first.state, "succeeded", "{first:?}");
        assert_eq!(second.state, "succeeded", "{second:?}");
        let (one, two) = if first.dispatched_at <= second.dispatched_at {
            (&first, &second)
        } else {
            (&second, &first)
        };
        assert!(
            two.dispatched_at >= one.finished_at.map(|f| f - 50),
            "the second run was sent while the first held the only slot: {one:?} {two:?}"
        );

        let script = json!({ "glue_type": "GLUE_SHELL", "glue_source": "#!/bin/sh\nsleep 20\n" });
        let (c1, c2) = (
            job(&api, group, script.clone()).await,
            job(&api, group, script).await,
        );
        let holding = api.trigger(c1, None, None).await;
        api.wait_dispatched(holding.id).await;
        let refused = api.trigger(c2, None, None).await;
        let refused = api.wait_final(refused.id).await;
        assert_eq!(refused.state, "failed", "{refused:?}");
        assert!(
            refused.trigger_msg().contains("no free slot"),
            "{refused:?}"
        );
    })
    .await;
}

/// A push executor may not register a `pull://` address (runs of its group would go to a
/// connection it does not hold); a pull connection with a wrong token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_addresses_are_registered_only_by_their_connection() {
    tickwork_it::run(Backend::Sqlite, |mut c: Cluster| async move {
        let api = c.start_admin().await;
        let group = api.create_group("guard-app").await;
        let answer = api
            .executor_call(
                "registry",
                Some(api.access_token()),
                &json!({ "registryGroup": "EXECUTOR", "registryKey": "guard-app",
                         "registryValue": "pull://forged" }),
            )
            .await;
        assert_eq!(answer["code"], 500, "{answer}");
        assert!(
            answer["msg"].as_str().unwrap_or("").contains("pull://"),
            "{answer}"
        );
        assert!(api.live_addresses(group).await.is_empty());

        let url = format!("{}/api/pull", api.base());
        let http = reqwest::Client::new();
        let plain = http.get(&url).send().await.expect("an answer");
        assert_eq!(plain.status().as_u16(), 400, "not an upgrade");
        for token in ["", "wrong-token"] {
            let upgrade = http
                .get(&url)
                .header("Connection", "Upgrade")
                .header("Upgrade", "websocket")
                .header("Sec-WebSocket-Version", "13")
                .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
                .header("XXL-JOB-ACCESS-TOKEN", token)
                .send()
                .await
                .expect("an answer");
            assert_eq!(upgrade.status().as_u16(), 401, "token {token:?}");
        }
        assert!(api.live_addresses(group).await.is_empty());
    })
    .await;
}

/// A saturated pull executor (one slot, taken): the runs waiting for it go by priority, not by
/// arrival, and a run triggered by hand goes before them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_pull_executor_takes_a_manual_run_first_then_higher_priority() {
    tickwork_it::run(Backend::Sqlite, |mut c: Cluster| async move {
        // Runs wait for the slot longer than the default call timeout.
        c.settings = AdminSettings {
            extra_toml: "[dispatch]\nexecutor_timeout_ms = 30000\n",
            ..AdminSettings::default()
        };
        let api = c.start_admin().await;
        let group = api.create_group("busy-app").await;
        let e = c
            .start_pull_executor("busy-app", &["--pull-slots", "1"])
            .await;
        api.wait_live(group, std::slice::from_ref(&e.address)).await;
        let script = |priority: i32| {
            json!({ "glue_type": "GLUE_SHELL", "glue_source": "#!/bin/sh\nsleep 0.3\n",
                    "priority": priority })
        };
        let holder = job(
            &api,
            group,
            json!({ "glue_type": "GLUE_SHELL",
                    "glue_source": "#!/bin/sh\nwhile [ ! -f \"$0.go\" ]; do sleep 0.05; done\n" }),
        )
        .await;
        let hold = api.trigger(holder, None, None).await;
        api.wait_dispatched(hold.id).await;

        // Two scheduled runs queue for the slot, the lower priority first.
        let t = tickwork_it::now_ms() + 1500;
        let once = |priority: i32, at: i64| {
            let mut spec = script(priority);
            spec["schedule_type"] = "ONCE".into();
            spec["schedule_conf"] = tickwork_it::rfc3339(at).into();
            spec["start"] = true.into();
            spec
        };
        let low = job(&api, group, once(1, t)).await;
        let high = job(&api, group, once(9, t + 300)).await;
        let queued = |job_id: i64| {
            let api = api.clone();
            async move {
                wait_until("a run waiting for the slot", WAIT, || async {
                    let runs = api.runs(job_id).await;
                    runs.into_iter().find(|r| r.state == "sending")
                })
                .await
            }
        };
        let low_run = queued(low).await;
        let high_run = queued(high).await;
        let by_hand = job(&api, group, script(0)).await;
        let hand_run = api.trigger(by_hand, None, None).await;
        wait_until("the manual run waiting too", WAIT, || async {
            (api.run(hand_run.id).await.state == "sending").then_some(())
        })
        .await;

        // Free the slot: the script's own path plus ".go".
        let scripts = e.logs.join("gluesource");
        let file = std::fs::read_dir(&scripts)
            .expect("the script folder")
            .filter_map(Result::ok)
            .map(|f| f.path())
            .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("$0.go")))
            .expect("the holder's script");
        std::fs::write(format!("{}.go", file.display()), b"").expect("the go file");

        let mut ended = Vec::new();
        for (name, id) in [
            ("manual", hand_run.id),
            ("high", high_run.id),
            ("low", low_run.id),
        ] {
            let run = api.wait_final(id).await;
            assert_eq!(run.state, "succeeded", "{name}: {run:?}");
            ended.push((run.dispatched_at.expect("dispatched"), name));
        }
        ended.sort();
        let order: Vec<&str> = ended.iter().map(|(_, n)| *n).collect();
        assert_eq!(order, ["manual", "high", "low"], "{ended:?}");
        assert_eq!(api.wait_final(hold.id).await.state, "succeeded");
    })
    .await;
}

/// An admin restart under a pull executor: the executor dials again and lists what it still
/// holds, a run still running and one whose result waits in its spool, so neither is taken
/// for lost; both end with their results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_executor_keeps_its_runs_across_an_admin_restart() {
    tickwork_it::run(Backend::Sqlite, |mut c: Cluster| async move {
        let api = c.start_admin().await;
        let group = api.create_group("stay-app").await;
        let e = c.start_pull_executor("stay-app", &[]).await;
        api.wait_live(group, std::slice::from_ref(&e.address)).await;
        let sleeper = |secs: u32| {
            json!({ "glue_type": "GLUE_SHELL",
                    "glue_source": format!("#!/bin/sh\necho begun\nsleep {secs}\n") })
        };
        let (long, short) = (
            job(&api, group, sleeper(6)).await,
            job(&api, group, sleeper(1)).await,
        );
        let long_run = api.trigger(long, None, None).await;
        let short_run = api.trigger(short, None, None).await;
        for id in [long_run.id, short_run.id] {
            api.wait_dispatched(id).await;
        }

        c.stop_admin().await;
        // The short run ends while no admin listens: its result goes to the spool.
        wait_until("the short run's result to be spooled", WAIT, || async {
            c.executor_log(&e).contains("spooling").then_some(())
        })
        .await;
        let api = c.start_admin().await;
        for id in [long_run.id, short_run.id] {
            let run = api.wait_final(id).await;
            assert_eq!(run.state, "succeeded", "{run:?}");
        }
    })
    .await;
}

/// A TLS front on `localhost` for the admin at `admin` (a `host:port`), with the test's own
/// certificate (`tests/tls`, issued by the test CA `tests/tls/ca.pem` for `localhost` and
/// 127.0.0.1): every connection is decrypted and forwarded. Its `https://` URL.
async fn tls_front(admin: String) -> String {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls");
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("admin.pem"))
        .expect("the certificate file")
        .collect::<Result<_, _>>()
        .expect("the certificate");
    let key = PrivateKeyDer::from_pem_file(dir.join("admin.key")).expect("the key");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("the server's certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("the front's listener");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, admin) = (acceptor.clone(), admin.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&admin).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    format!("https://localhost:{port}")
}

/// A pull executor dials an `https://` admin: the WebSocket runs over TLS, verified against the
/// roots the system would use (here the test's CA, named by `SSL_CERT_FILE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_executor_dials_an_https_admin() {
    tickwork_it::run(Backend::Sqlite, |mut c: Cluster| async move {
        let api = c.start_admin().await;
        let group = api.create_group("tls-app").await;
        let admin = api.base().trim_start_matches("http://").to_owned();
        let front = tls_front(admin).await;
        let ca = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls/ca.pem");
        let ca = ca.to_str().expect("a UTF-8 path").to_owned();
        let e = c
            .start_pull_executor_at("tls-app", &front, &[], &[("SSL_CERT_FILE", &ca)])
            .await;
        api.wait_live(group, std::slice::from_ref(&e.address)).await;
        let echo = job(&api, group, json!({ "handler": "echo" })).await;
        let run = api.trigger(echo, Some("over TLS"), None).await;
        let run = api.wait_final(run.id).await;
        assert_eq!(run.state, "succeeded", "{run:?}");
        assert_eq!(run.handle_msg(), "over TLS", "{run:?}");

        // Without the CA the certificate is refused, and nothing connects.
        let stranger = c.start_pull_executor_at("tls-app", &front, &[], &[]).await;
        wait_until("the refused certificate in the log", WAIT, || async {
            let log = c.executor_log(&stranger);
            log.contains("cannot dial the admin").then_some(())
        })
        .await;
        assert!(
            c.executor_log(&stranger)
                .to_lowercase()
                .contains("certificate"),
            "{}",
            c.executor_log(&stranger)
        );
        assert_eq!(
            api.live_addresses(group).await,
            std::slice::from_ref(&e.address)
        );
    })
    .await;
}
