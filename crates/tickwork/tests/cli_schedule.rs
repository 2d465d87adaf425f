//! `tickwork schedule heatmap` against a real `tickwork admin` process on SQLite: the table of a
//! known day (an hour a row, a character a minute), the peaks with the jobs colliding in them,
//! DST in a job's own zone, one group in hourly buckets, the JSON answer as it is, and bad
//! input refused with exit status 2 and a message naming what is wrong.

use serde_json::Value;
use tickwork_protocol::api::JobInput;

mod cli_support;
use cli_support::{Admin, TOKEN, cli, create_group, ok, start_admin};

fn create_job(admin: &Admin, app: &str, key: &str, cron: &str, tz: &str) {
    let client = tickwork_client::Client::new(&admin.url, TOKEN).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let groups = client.groups_list().await.unwrap();
        let group = groups.iter().find(|g| g.app_name == app).unwrap().id;
        let mut input = JobInput::new(group);
        input.key = Some(key.to_owned());
        input.start = true;
        input.spec.description = format!("the {key} job");
        input.spec.schedule_type = tickwork_core::ScheduleType::Cron;
        input.spec.schedule_conf = cron.to_owned();
        input.spec.time_zone = tz.to_owned();
        input.spec.handler = "echo".to_owned();
        client.job_create(&input).await.unwrap();
    });
}

/// An admin with three running jobs: midnight UTC and 02:30 Berlin in `alpha`, every quarter
/// hour in `beta`.
fn admin_with_jobs(dir: &std::path::Path) -> Admin {
    let admin = start_admin(&dir.join("data"));
    create_group(&admin, "alpha");
    create_group(&admin, "beta");
    create_job(&admin, "alpha", "nightly-utc", "0 0 0 * * ?", "UTC");
    create_job(
        &admin,
        "alpha",
        "nightly-berlin",
        "0 30 2 * * ?",
        "Europe/Berlin",
    );
    create_job(&admin, "beta", "quarter", "0 */15 * * * ?", "UTC");
    admin
}

#[test]
fn heatmap_prints_a_day_by_the_minute_with_groups_and_peaks() {
    let dir = tempfile::tempdir().unwrap();
    let admin = admin_with_jobs(dir.path());
    // 28 March 2027: Berlin springs forward at 01:00Z, so its 02:30 fires at 01:00Z.
    let text = ok(cli(
        &admin,
        &[
            "schedule",
            "heatmap",
            "--from",
            "2027-03-28T00:00:00Z",
            "--hours",
            "24",
            "--tz",
            "UTC",
        ],
    ));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "98 fires of 3 running jobs from 2027-03-28 00:00 to 2027-03-29 00:00 (UTC), buckets \
         of 1m"
    );
    assert_eq!(
        lines[2],
        "FROM                 FIRES  BUSIEST  ONE CHARACTER PER 1m (\" .:-=+*#%@\" up to 2)"
    );
    // Midnight: nightly-utc and a quarter together (@), then three quarters alone (+).
    let quarters = |first: char| {
        let mut s = vec![' '; 46];
        s[0] = first;
        s[15] = '+';
        s[30] = '+';
        s[45] = '+';
        s.into_iter().collect::<String>()
    };
    assert_eq!(
        lines[3],
        format!("2027-03-28 00:00         5        2  {}", quarters('@'))
    );
    assert_eq!(
        lines[4],
        format!("2027-03-28 01:00         5        2  {}", quarters('@'))
    );
    assert_eq!(
        lines[5],
        format!("2027-03-28 02:00         4        1  {}", quarters('+'))
    );
    // A row an hour, then the groups.
    assert!(
        lines[3..27].iter().all(|l| l.starts_with("2027-03-28 ")),
        "{text}"
    );
    assert_eq!(lines[27], "");
    assert!(
        text.contains("\nGROUP                        FIRES  BUSIEST BUCKET\nalpha                            2  2027-03-28 00:00 (1)\nbeta                            96  2027-03-28 00:00 (1)\n"),
        "{text}"
    );
    let peaks = text.split("\nPEAKS\n").nth(1).expect("peaks");
    assert!(
        peaks.starts_with(
            "2027-03-28 00:00  2 fires\n    nightly-utc                            1  first \
             00:00:00  the nightly-utc job\n    quarter                                1  first \
             00:00:00  the quarter job\n2027-03-28 01:00  2 fires\n    nightly-berlin"
        ),
        "{peaks}"
    );
    assert!(!text.contains("COUNTED IN PART"), "{text}");
}

#[test]
fn heatmap_of_one_group_in_hours_and_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let admin = admin_with_jobs(dir.path());
    let text = ok(cli(
        &admin,
        &[
            "schedule",
            "heatmap",
            "--group",
            "beta",
            "--bucket",
            "1h",
            "--from",
            "2027-03-28 00:00",
            "--to",
            "2027-03-28 03:00",
            "--tz",
            "UTC",
        ],
    ));
    let table: Vec<&str> = text.lines().skip(2).take(4).collect();
    let bar = "#".repeat(40);
    assert_eq!(
        table,
        [
            "FROM                 FIRES  BAR (# up to 4)",
            &format!("2027-03-28 00:00         4  {bar}"),
            &format!("2027-03-28 01:00         4  {bar}"),
            &format!("2027-03-28 02:00         4  {bar}"),
        ]
    );

    let json = ok(cli(
        &admin,
        &[
            "schedule",
            "heatmap",
            "--from",
            "2027-03-28T00:00:00+01:00",
            "--hours",
            "23",
            "--bucket",
            "1h",
            "--json",
        ],
    ));
    let v: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(v["buckets"], 23);
    assert_eq!(v["fires"], 2 + 23 * 4);
    assert_eq!(v["groups"][0]["app_name"], "alpha");
    assert_eq!(
        v["groups"][0]["counts"][2], 1,
        "02:30 Berlin fires at 01:00Z"
    );
    assert_eq!(
        v["peaks"][0]["start"],
        v["from"].as_i64().unwrap() + 3_600_000
    );
}

#[test]
fn bad_heatmap_input_exits_2_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let admin = admin_with_jobs(dir.path());
    let cases: &[(&[&str], &str)] = &[
        (
            &["--bucket", "90s"],
            "bucket: \"90s\" is not a whole number of minutes",
        ),
        (&["--bucket", "60"], "bucket: \"60\" needs a unit"),
        (
            &["--group", "gamma"],
            "group: no executor group has app name \"gamma\"",
        ),
        (
            &["--from", "yesterday"],
            "--from: \"yesterday\" is not a time",
        ),
        (
            &["--hours", "200"],
            "to: the range is longer than the maximum of 7 days",
        ),
        (
            &[
                "--from",
                "2027-03-28T00:00:00Z",
                "--to",
                "2027-03-27T00:00:00Z",
            ],
            "is not after from",
        ),
        (
            &["--tz", "Mars/Olympus"],
            "\"Mars/Olympus\" is not a known IANA time zone",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["schedule", "heatmap"];
        all.extend_from_slice(args);
        let out = cli(&admin, &all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
