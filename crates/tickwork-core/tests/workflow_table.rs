//! Workflows as tables: the checks of a DAG, an instance's next step for each situation
//! (fan-in, conditions, skips, failure policies, disabled nodes), the operator's actions, the
//! cap on instances, and the context.

use tickwork_core::job::Limits;
use tickwork_core::workflow::context::{self, Context};
use tickwork_core::workflow::step::{
    self, Admit, InstanceState, NodeState, Step, admit, advance, mark_succeeded, rerun, resume,
};
use tickwork_core::workflow::{Dag, Edge, EdgeOn, FailurePolicy, Graph, Node, Overflow};

use NodeState::{
    Failed as F, Running as R, Skipped as K, Stopped as X, Succeeded as S, Waiting as W,
};

fn dag(nodes: &[&str], edges: &[(&str, &str, EdgeOn)]) -> Dag {
    Dag {
        nodes: nodes
            .iter()
            .map(|k| Node::new(*k, format!("job-{k}")))
            .collect(),
        edges: edges
            .iter()
            .map(|(f, t, on)| Edge::new(*f, *t, *on))
            .collect(),
    }
}

/// A -> B, A -> C, B + C -> D.
fn diamond() -> Dag {
    use EdgeOn::Success as Ok_;
    dag(
        &["A", "B", "C", "D"],
        &[
            ("A", "B", Ok_),
            ("A", "C", Ok_),
            ("B", "D", Ok_),
            ("C", "D", Ok_),
        ],
    )
}

fn graph(d: &Dag) -> Graph {
    Graph::new(d, &Limits::STANDARD).unwrap()
}

fn step_of(start: &[usize], skip: &[usize], end: Option<InstanceState>) -> Step {
    Step {
        start: start.to_vec(),
        skip: skip.to_vec(),
        end,
        ..Step::default()
    }
}

#[test]
fn a_diamond_is_checked_and_ordered() {
    let d = diamond();
    let g = graph(&d);
    assert_eq!(g.len(), 4);
    assert_eq!(g.order().first(), Some(&0));
    assert_eq!(g.order().last(), Some(&3));
    assert_eq!(g.parents(3).len(), 2);
    assert_eq!(g.descendants(0), vec![1, 2, 3]);
    assert_eq!(g.descendants(1), vec![3]);
    assert!(g.descendants(3).is_empty());
}

#[test]
fn bad_definitions_are_refused_naming_what_is_wrong() {
    use EdgeOn::Success as Ok_;
    let mut bad_timeout = dag(&["A"], &[]);
    bad_timeout.nodes[0].timeout_s = Some(-1);
    let mut bad_retries = dag(&["A"], &[]);
    bad_retries.nodes[0].retry_count = Some(101);
    let mut no_job = dag(&["A"], &[]);
    no_job.nodes[0].job = " ".into();
    let mut big_params = dag(&["A"], &[]);
    big_params.nodes[0].params = Some("p".repeat(65_536));
    let many: Vec<String> = (0..201).map(|i| format!("n{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    // (dag, field, words of the message)
    let cases: Vec<(Dag, &str, &str)> = vec![
        (dag(&[], &[]), "nodes", "at least one node"),
        (dag(&many, &[]), "nodes", "201 nodes; at most 200"),
        (dag(&["A", "A"], &[]), "nodes", "\"A\" is used twice"),
        (dag(&["a b"], &[]), "nodes", "node key \"a b\" must be"),
        (dag(&[""], &[]), "nodes", "node key \"\" must be"),
        (no_job, "nodes", "names no job"),
        (bad_timeout, "nodes", "timeout_s -1 is negative"),
        (bad_retries, "nodes", "retry_count 101 must be 0 to 100"),
        (big_params, "nodes", "params must be at most 65535 bytes"),
        (
            dag(&["A"], &[("A", "Z", Ok_)]),
            "edges",
            "edge \"A\" -> \"Z\": no node \"Z\"",
        ),
        (
            dag(&["A"], &[("A", "A", Ok_)]),
            "edges",
            "joins a node to itself",
        ),
        (
            dag(&["A", "B"], &[("A", "B", Ok_), ("A", "B", EdgeOn::Failure)]),
            "edges",
            "is given twice",
        ),
        (
            dag(
                &["A", "B", "C", "D"],
                &[
                    ("D", "A", Ok_),
                    ("A", "B", Ok_),
                    ("B", "C", Ok_),
                    ("C", "A", Ok_),
                ],
            ),
            "edges",
            "cycle through node",
        ),
    ];
    for (d, field, words) in cases {
        let e = Graph::new(&d, &Limits::STANDARD).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{field}: ")), "{e}");
        assert!(e.contains(words), "{e} lacks {words:?}");
    }
    // The node a cycle is reported through is on the cycle, not before it.
    let d = dag(
        &["D", "A", "B", "C"],
        &[
            ("D", "A", Ok_),
            ("A", "B", Ok_),
            ("B", "C", Ok_),
            ("C", "A", Ok_),
        ],
    );
    let e = Graph::new(&d, &Limits::STANDARD).unwrap_err().to_string();
    assert!(!e.contains("\"D\""), "{e}");
}

#[test]
fn a_definition_reads_from_toml_and_json_with_defaults() {
    let toml_text = r#"
        [[nodes]]
        key = "extract"
        job = "etl-extract"

        [[nodes]]
        key = "load"
        job = "etl-load"
        params = "--rows ${ctx.rows}"
        skip_when_failed = true

        [[edges]]
        from = "extract"
        to = "load"
    "#;
    let json: serde_json::Value = serde_json::json!({
        "nodes": [
            { "key": "extract", "job": "etl-extract" },
            { "key": "load", "job": "etl-load", "params": "--rows ${ctx.rows}",
              "skip_when_failed": true }
        ],
        "edges": [{ "from": "extract", "to": "load", "on": "SUCCESS" }]
    });
    let from_json: Dag = serde_json::from_value(json).unwrap();
    let from_toml: Dag = toml_like(toml_text);
    assert_eq!(from_json, from_toml);
    assert!(from_json.nodes[0].enabled);
    assert_eq!(from_json.edges[0].on, EdgeOn::Success);
    let unknown = serde_json::from_value::<Dag>(serde_json::json!({"nodes": [], "edgs": []}));
    assert!(unknown.unwrap_err().to_string().contains("unknown field"));
    let bad_on = serde_json::from_value::<Dag>(serde_json::json!({
        "edges": [{ "from": "a", "to": "b", "on": "SOMETIMES" }]
    }));
    assert!(
        bad_on
            .unwrap_err()
            .to_string()
            .contains("\"SOMETIMES\" is not one of SUCCESS FAILURE ALWAYS")
    );
}

/// The TOML above as the same JSON value: core does not depend on a TOML parser, so the test
/// reads the few forms it uses by hand.
fn toml_like(text: &str) -> Dag {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut table: Option<(&str, serde_json::Map<String, serde_json::Value>)> = None;
    let mut flush = |t: Option<(&str, serde_json::Map<_, _>)>| {
        if let Some((kind, map)) = t {
            let v = serde_json::Value::Object(map);
            if kind == "nodes" {
                nodes.push(v);
            } else {
                edges.push(v);
            }
        }
    };
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(kind) = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
            flush(table.take());
            table = Some((kind, serde_json::Map::new()));
        } else if let Some((k, v)) = line.split_once(" = ") {
            let v: serde_json::Value = serde_json::from_str(v).unwrap();
            table.as_mut().unwrap().1.insert(k.to_owned(), v);
        }
    }
    flush(table.take());
    serde_json::from_value(serde_json::json!({ "nodes": nodes, "edges": edges })).unwrap()
}

#[test]
fn a_diamond_runs_its_join_once_after_both_branches() {
    use InstanceState::{Failed as IF, Succeeded as IS};
    let d = diamond();
    let g = graph(&d);
    // (states of A B C D, policy, step)
    let cases: Vec<([NodeState; 4], FailurePolicy, Step)> = vec![
        ([W, W, W, W], FailurePolicy::End, step_of(&[0], &[], None)),
        ([R, W, W, W], FailurePolicy::End, Step::default()),
        (
            [S, W, W, W],
            FailurePolicy::End,
            step_of(&[1, 2], &[], None),
        ),
        // D waits for both parents.
        ([S, S, R, W], FailurePolicy::End, Step::default()),
        ([S, R, S, W], FailurePolicy::Continue, Step::default()),
        ([S, S, S, W], FailurePolicy::End, step_of(&[3], &[], None)),
        ([S, S, S, R], FailurePolicy::End, Step::default()),
        (
            [S, S, S, S],
            FailurePolicy::End,
            step_of(&[], &[], Some(IS)),
        ),
        // Continue: D depends on the failed B and is skipped; the instance fails at the end.
        ([S, F, R, W], FailurePolicy::Continue, Step::default()),
        (
            [S, F, S, W],
            FailurePolicy::Continue,
            step_of(&[], &[3], Some(IF)),
        ),
        // End: the first failure ends it, C killed and D stopped.
        (
            [S, F, R, W],
            FailurePolicy::End,
            Step {
                kill: vec![2],
                stop: vec![3],
                end: Some(IF),
                ..Step::default()
            },
        ),
        // A failed: everything after it is skipped in one step.
        (
            [F, W, W, W],
            FailurePolicy::Continue,
            step_of(&[], &[1, 2, 3], Some(IF)),
        ),
    ];
    for (states, policy, want) in cases {
        assert_eq!(
            advance(&d, &g, &states, policy),
            want,
            "{states:?} {policy}"
        );
    }
}

#[test]
fn conditioned_edges_take_the_branch_of_the_parents_outcome() {
    use EdgeOn::{Always, Failure, Success};
    use InstanceState::{Failed as IF, Succeeded as IS};
    // A -> ok on success, A -> recover on failure, A -> cleanup always.
    let d = dag(
        &["A", "ok", "recover", "cleanup"],
        &[
            ("A", "ok", Success),
            ("A", "recover", Failure),
            ("A", "cleanup", Always),
        ],
    );
    let g = graph(&d);
    let cases: Vec<([NodeState; 4], FailurePolicy, Step)> = vec![
        (
            [S, W, W, W],
            FailurePolicy::End,
            step_of(&[1, 3], &[2], None),
        ),
        // A failure with a FAILURE edge out of it was planned for: not the instance's failure.
        (
            [F, W, W, W],
            FailurePolicy::End,
            step_of(&[2, 3], &[1], None),
        ),
        (
            [F, K, S, S],
            FailurePolicy::End,
            step_of(&[], &[], Some(IS)),
        ),
        // The error branch failing fails the instance.
        (
            [F, K, F, S],
            FailurePolicy::Continue,
            step_of(&[], &[], Some(IF)),
        ),
    ];
    for (states, policy, want) in cases {
        assert_eq!(advance(&d, &g, &states, policy), want, "{states:?}");
    }
    // A skipped parent skips SUCCESS and FAILURE children but not ALWAYS ones.
    let d = dag(
        &["A", "B", "s", "f", "a"],
        &[
            ("A", "B", Success),
            ("B", "s", Success),
            ("B", "f", Failure),
            ("B", "a", Always),
        ],
    );
    let g = graph(&d);
    assert_eq!(
        advance(&d, &g, &[F, W, W, W, W], FailurePolicy::Continue),
        step_of(&[4], &[1, 2, 3], None)
    );
}

#[test]
fn skip_when_failed_and_disabled_nodes_pass_as_successes() {
    use InstanceState::Succeeded as IS;
    let mut d = diamond();
    d.nodes[1].skip_when_failed = true;
    let g = graph(&d);
    assert_eq!(
        advance(&d, &g, &[S, F, S, W], FailurePolicy::End),
        step_of(&[3], &[], None)
    );
    assert_eq!(
        advance(&d, &g, &[S, F, S, S], FailurePolicy::End),
        step_of(&[], &[], Some(IS))
    );
    let mut d = diamond();
    d.nodes[2].enabled = false;
    let g = graph(&d);
    // C is passed over, and D still runs after B.
    assert_eq!(
        advance(&d, &g, &[S, W, W, W], FailurePolicy::End),
        step_of(&[1], &[2], None)
    );
    assert_eq!(
        advance(&d, &g, &[S, S, K, W], FailurePolicy::End),
        step_of(&[3], &[], None)
    );
}

#[test]
fn operators_stop_resume_mark_and_rerun() {
    use InstanceState::{Failed as IF, Running as IR, Stopped as IX};
    let d = diamond();
    let g = graph(&d);
    assert_eq!(
        step::stop(&[S, R, S, W]),
        Step {
            kill: vec![1],
            stop: vec![3],
            end: Some(IX),
            ..Step::default()
        }
    );
    // Resume keeps the succeeded nodes and decides the rest anew.
    let resumed = resume(IF, &[S, F, S, K]).unwrap();
    assert_eq!(resumed, [S, W, S, W]);
    assert_eq!(
        advance(&d, &g, &resumed, FailurePolicy::End),
        step_of(&[1], &[], None)
    );
    assert_eq!(resume(IX, &[S, X, R, W]).unwrap(), [S, W, W, W]);
    assert!(
        resume(IR, &[S, R, W, W])
            .unwrap_err()
            .to_string()
            .contains("this one is RUNNING")
    );
    // Marking the failed B succeeded unblocks D.
    let marked = mark_succeeded(IF, &[S, F, S, K], 1).unwrap();
    assert_eq!(marked, [S, S, S, K]);
    let resumed = resume(IF, &marked).unwrap();
    assert_eq!(
        advance(&d, &g, &resumed, FailurePolicy::End),
        step_of(&[3], &[], None)
    );
    for (instance, states, i) in [
        (IR, [S, R, W, W], 1),
        (IF, [S, S, S, F], 0),
        (IF, [S, F, S, K], 9),
    ] {
        assert!(
            mark_succeeded(instance, &states, i).is_err(),
            "{states:?} {i}"
        );
    }
    // Rerun C: it runs again and D, which did not succeed, waits for it.
    assert_eq!(rerun(&g, IF, &[S, S, F, K], 2).unwrap(), [S, S, R, W]);
    assert_eq!(rerun(&g, IF, &[S, S, S, S], 0).unwrap(), [R, S, S, S]);
    assert!(rerun(&g, IR, &[S, S, R, W], 2).is_err());
}

#[test]
fn the_cap_starts_queues_or_skips() {
    // (running, queued, cap, overflow, admitted)
    let cases = [
        (0, 0, 1, Overflow::Skip, Admit::Start),
        (1, 0, 1, Overflow::Skip, Admit::Skip),
        (1, 0, 1, Overflow::Queue, Admit::Queue),
        (1, 0, 2, Overflow::Skip, Admit::Start),
        // A fire does not overtake a queued instance.
        (0, 1, 2, Overflow::Queue, Admit::Queue),
        (0, 0, 0, Overflow::Skip, Admit::Start),
        (1, 0, 0, Overflow::Skip, Admit::Skip),
    ];
    for (running, queued, cap, overflow, want) in cases {
        assert_eq!(
            admit(running, queued, cap, overflow),
            want,
            "{running} {queued} {cap} {overflow}"
        );
    }
}

#[test]
fn the_context_is_added_to_by_messages_and_read_by_params() {
    let start = context::initial("day=2026-11-28");
    assert_eq!(
        start.get("params").map(String::as_str),
        Some("day=2026-11-28")
    );
    assert!(context::initial("").is_empty());

    // (message, what it adds)
    type Added<'a> = Option<Vec<(&'a str, &'a str)>>;
    let cases: Vec<(&str, Added)> = vec![
        ("done", None),
        (
            "tickwork-context: {\"rows\": \"42\"}",
            Some(vec![("rows", "42")]),
        ),
        (
            "loaded\n  tickwork-context: {\"rows\": 7, \"ok\": true}\ntickwork-context: {\"rows\": \"8\"}",
            Some(vec![("ok", "true"), ("rows", "8")]),
        ),
    ];
    for (message, want) in cases {
        let got = context::from_message(message).unwrap();
        let want = want.map(|kv| {
            kv.into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect::<Context>()
        });
        assert_eq!(got, want, "{message}");
    }
    let bad = context::from_message("tickwork-context: [1]").unwrap_err();
    assert!(bad.to_string().starts_with("context: "), "{bad}");

    let add = |k: &str, v: &str| Context::from([(k.to_owned(), v.to_owned())]);
    let ctx = context::merge(&start, add("rows", "42")).unwrap();
    assert_eq!(ctx.len(), 2);
    assert!(context::merge(&ctx, add("bad name", "x")).is_err());
    let big = context::merge(&ctx, add("blob", &"x".repeat(context::CONTEXT_BYTES)));
    assert!(big.unwrap_err().to_string().contains("at most 16384"));

    // (params, rendered)
    let cases = [
        ("--rows ${ctx.rows}", "--rows 42"),
        ("${ctx.params}|${ctx.rows}", "day=2026-11-28|42"),
        ("${ctx.nope} stays", "${ctx.nope} stays"),
        ("open ${ctx.rows", "open ${ctx.rows"),
        ("no template", "no template"),
        ("${ctx}", r#"{"params":"day=2026-11-28","rows":"42"}"#),
    ];
    for (params, want) in cases {
        assert_eq!(context::render(params, &ctx), want, "{params}");
    }
    assert_eq!(context::from_json(&context::to_json(&ctx)), ctx);
    assert!(context::from_json("not json").is_empty());
}

#[test]
fn a_due_fire_starts_on_time_and_follows_the_misfire_policy_when_late() {
    use tickwork_core::schedule::Schedule;
    use tickwork_core::workflow::{DueFire, due_fire};
    use tickwork_core::{MisfireStrategy::*, ScheduleType, TriggerType};
    let every_10s = Schedule::parse(ScheduleType::FixRate, "10s", "UTC").unwrap();
    let once = Schedule::parse(ScheduleType::Once, "1970-01-01T00:01:40Z", "UTC").unwrap();
    // (schedule, due, now, policy, decision); threshold 5 s
    let cases = [
        (
            &every_10s,
            100_000,
            100_000,
            DoNothing,
            Some((100_000, TriggerType::FixRate)),
            Some(110_000),
        ),
        (
            &every_10s,
            100_000,
            105_000,
            DoNothing,
            Some((100_000, TriggerType::FixRate)),
            Some(110_000),
        ),
        (&every_10s, 100_000, 105_001, DoNothing, None, Some(115_001)),
        (
            &every_10s,
            100_000,
            163_000,
            FireOnceNow,
            Some((100_000, TriggerType::Misfire)),
            Some(173_000),
        ),
        (
            &once,
            100_000,
            100_010,
            DoNothing,
            Some((100_000, TriggerType::Once)),
            None,
        ),
        (&once, 100_000, 900_000, DoNothing, None, None),
    ];
    for (schedule, due, now, policy, fire, next) in cases {
        assert_eq!(
            due_fire(schedule, due, now, policy, 5_000),
            DueFire {
                fire,
                next_fire_at: next
            },
            "{:?} due {due} now {now} {policy}",
            schedule.kind()
        );
    }
}
