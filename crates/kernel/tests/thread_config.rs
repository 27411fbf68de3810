//! `ThreadConfig` parsing, NDB's rules, the `MaxNoOfExecutionThreads` table
//! and the layouts built from them.

use kernel::thread_config::*;
use proptest::prelude::*;
use ThreadRole::*;

fn parse(text: &str) -> ThreadConfig {
    match ThreadConfig::parse(text) {
        Ok(config) => config,
        Err(error) => panic!("{text:?} should parse: {error}"),
    }
}

fn refused(text: &str) -> String {
    match ThreadConfig::parse(text) {
        Ok(config) => panic!("{text:?} should be refused, parsed as {config:?}"),
        Err(error) => error.to_string(),
    }
}

fn layout(text: &str) -> ThreadLayout {
    ThreadLayout::from_thread_config(&parse(text))
}

fn layout_of(text: &str) -> ThreadLayout {
    layout(text)
}

fn names(layout: &ThreadLayout) -> Vec<&str> {
    layout.threads.iter().map(|t| t.name.as_str()).collect()
}

fn thread<'a>(layout: &'a ThreadLayout, name: &str) -> &'a ThreadSpec {
    match layout.threads.iter().find(|t| t.name == name) {
        Some(thread) => thread,
        None => panic!("no thread {name} in {:?}", names(layout)),
    }
}

#[test]
fn an_adaptive_spin_method_bounds_threads_without_a_spintime() {
    let mut layout = layout("ldm={count=2},tc={spintime=0},main={spintime=40},io,wd");
    layout.set_spin_method(SpinMethod::CostBased);
    let spin = |name: &str| {
        let t = thread(&layout, name);
        (t.spin_method, t.spintime_us)
    };
    assert_eq!(
        spin("ldm0"),
        (SpinMethod::CostBased, 100),
        "the method's bound"
    );
    assert_eq!(
        spin("tc0"),
        (SpinMethod::CostBased, 0),
        "a given 0 turns it off"
    );
    assert_eq!(
        spin("main"),
        (SpinMethod::CostBased, 40),
        "a given spintime bounds it"
    );
    assert_eq!(spin("io").1, 0, "io threads never spin");
    assert_eq!(spin("wd").1, 0, "nor does the watchdog");
    let mut fixed = layout_of("ldm={count=2},main={spintime=40}");
    fixed.set_spin_method(SpinMethod::Static);
    assert_eq!(thread(&fixed, "ldm0").spintime_us, 0);
    assert_eq!(thread(&fixed, "main").spintime_us, 40);
    assert_eq!(
        SpinMethod::from_name("databasemachinespinning"),
        Some(SpinMethod::DatabaseMachine)
    );
    assert_eq!(SpinMethod::from_name("spinning"), None);
}

#[test]
fn the_issue_example_parses_into_the_threads_it_names() {
    let layout = layout(
        "ldm={count=4,cpubind=0-3},tc={count=2,cpuset=4-5,spintime=50},recv,send,main,rep,io,wd",
    );
    assert_eq!(
        names(&layout),
        [
            "ldm0", "ldm1", "ldm2", "ldm3", "tc0", "tc1", "main", "rep", "recv0", "send0", "io",
            "wd"
        ]
    );
    for k in 0..4 {
        let ldm = thread(&layout, &format!("ldm{k}"));
        assert_eq!((ldm.role, ldm.index), (Ldm, k as u32));
        assert_eq!(ldm.cpubind, Some(k));
        assert_eq!(ldm.cpuset, None);
        assert_eq!((ldm.realtime, ldm.spintime_us), (false, 0));
        assert_eq!(ldm.hosts, [Ldm]);
    }
    for k in 0..2 {
        let tc = thread(&layout, &format!("tc{k}"));
        assert_eq!(tc.cpubind, None);
        assert_eq!(tc.cpuset, Some(vec![4, 5]));
        assert_eq!(tc.spintime_us, 50);
        assert_eq!(tc.hosts, [Tc]);
    }
    assert_eq!(
        thread(&layout, "main").hosts,
        [Main],
        "tc threads exist: main hosts no TC"
    );
    assert_eq!(layout.count(Ldm), 4);
    assert_eq!(layout.count(Tc), 2);
    assert_eq!(layout.count(Send), 1);
    assert_eq!(layout.count(Recv), 1);
}

#[test]
fn the_seed_examples_parse() {
    // Seed 004 writes the split form with a typo, `ldm={cpubind=3)`; NDB refuses
    // that too, so the example is checked as meant and its typo as refused.
    let split = "ldm={cpubind=0},ldm={cpubind=1},ldm={cpubind=2},ldm={cpubind=3}";
    let joined = "ldm={count=4,cpubind=0-3}";
    assert_eq!(layout(split), layout(joined));
    assert_eq!(parse(split).count(Ldm), 4);
    let typo = refused("ldm={cpubind=0},ldm={cpubind=1},ldm={cpubind=2},ldm={cpubind=3)");
    assert!(typo.contains("\"3)\""), "{typo}");
    // DESIGN.md's example.
    let design = layout(
        "ldm={count=4,cpubind=0-3},tc={count=2},recv={count=1},send={count=1},main,rep,io,wd",
    );
    assert_eq!(design.count(Ldm), 4);
    assert_eq!(design.count(Tc), 2);
    // "0-3 is equivalent to 0,1,2-3" (seed 004).
    assert_eq!(
        parse("ldm={count=4,cpubind=0,1,2-3}"),
        parse("ldm={count=4,cpubind=0-3}")
    );
}

#[test]
fn groups_of_one_role_add_up() {
    let config = parse("ldm={cpubind=0},ldm={count=3,cpuset=4-7,realtime=1}");
    assert_eq!(config.groups.len(), 2);
    assert_eq!(config.count(Ldm), 4);
    let layout = ThreadLayout::from_thread_config(&config);
    assert_eq!(names(&layout)[..4], ["ldm0", "ldm1", "ldm2", "ldm3"]);
    assert_eq!(thread(&layout, "ldm0").cpubind, Some(0));
    assert!(!thread(&layout, "ldm0").realtime);
    for name in ["ldm1", "ldm2", "ldm3"] {
        assert_eq!(thread(&layout, name).cpuset, Some(vec![4, 5, 6, 7]));
        assert!(thread(&layout, name).realtime);
    }
}

#[test]
fn whitespace_case_and_extra_cpus_are_tolerated() {
    let config = parse("  LDM = { count = 2 , cpubind = 0 , 1 , 5 } ,\n main , Rep ");
    assert_eq!(config.groups[0].cpubind, Some(vec![0, 1, 5]));
    assert_eq!(config.groups[0].count, 2);
    let layout = ThreadLayout::from_thread_config(&config);
    assert_eq!(
        thread(&layout, "ldm1").cpubind,
        Some(1),
        "extra CPUs are left unused"
    );
    // A CPU list ends where a key starts.
    let config = parse("tc={cpuset=1,2,3,count=2,spintime=500}");
    assert_eq!(config.groups[0].cpuset, Some(vec![1, 2, 3]));
    assert_eq!(config.groups[0].count, 2);
    assert_eq!(config.groups[0].spintime_us, Some(500));
    assert_eq!(parse("ldm={}").groups[0], ThreadGroup::new(Ldm));
}

#[test]
fn roles_not_named_get_their_defaults() {
    for text in ["", "   ", "ldm"] {
        let layout = layout(text);
        assert_eq!(
            names(&layout),
            ["ldm0", "main", "rep", "recv0", "io", "wd"],
            "{text:?}"
        );
        assert_eq!(layout.count(Tc), 0);
        assert_eq!(layout.count(Send), 0);
    }
}

#[test]
fn without_tc_threads_main_hosts_tc_and_without_send_threads_nobody_sends() {
    let layout = layout("ldm={count=2},tc={count=0},send={count=0}");
    assert_eq!(layout.count(Tc), 0);
    let main = layout.threads.iter().position(|t| t.name == "main");
    assert!(main.is_some());
    for instance in 0..4 {
        assert_eq!(layout.thread_for(Tc, instance), main);
    }
    assert_eq!(layout.thread_for(Send, 0), None);
    assert_eq!(layout.count(Send), 0);
}

#[test]
fn without_ldm_threads_main_hosts_the_one_ldm_instance() {
    let layout = layout("ldm={count=0}");
    assert_eq!(layout.count(Ldm), 0);
    let main = layout.threads.iter().position(|t| t.name == "main");
    assert!(main.is_some());
    assert_eq!(layout.thread_for(Ldm, 0), main);
    assert_eq!(layout.thread_for(Tc, 0), main);
    assert!(layout.threads.iter().all(|t| t.role != Ldm));
}

#[test]
fn without_recv_threads_main_hosts_the_receive_loop() {
    let folded = layout("ldm={count=0},recv={count=0}");
    assert_eq!(names(&folded), ["main", "rep", "io", "wd"]);
    assert_eq!(folded.count(Recv), 0);
    let main = folded.threads.iter().position(|t| t.name == "main");
    for role in [Ldm, Tc, Main, Recv] {
        assert_eq!(folded.thread_for(role, 0), main, "{role}");
    }
    // With ldm threads, only the receive loop joins main.
    let with_ldm = layout("ldm={count=2},recv={count=0}");
    let main = with_ldm.threads.iter().position(|t| t.name == "main");
    assert_eq!(with_ldm.thread_for(Recv, 0), main);
    assert_ne!(with_ldm.thread_for(Ldm, 0), main);
    assert_eq!(
        names(&with_ldm),
        ["ldm0", "ldm1", "main", "rep", "io", "wd"]
    );
    // Written back, it reads the same.
    let config = parse("ldm={count=0},recv={count=0}");
    assert_eq!(config.to_string(), "ldm={count=0},recv={count=0}");
    assert_eq!(parse(&config.to_string()), config);
    assert_eq!(config.count(Recv), 0);
}

#[test]
fn instances_go_round_robin_over_the_hosting_threads() {
    let layout = layout("ldm={count=4},tc={count=2},recv={count=3}");
    let ldm: Vec<usize> = (0..4)
        .map(|i| {
            layout
                .threads
                .iter()
                .position(|t| t.name == format!("ldm{i}"))
                .unwrap_or(usize::MAX)
        })
        .collect();
    for instance in 0..12u32 {
        assert_eq!(
            layout.thread_for(Ldm, instance),
            Some(ldm[instance as usize % 4])
        );
    }
    let tc0 = layout.thread_for(Tc, 0);
    let tc1 = layout.thread_for(Tc, 1);
    assert_ne!(tc0, tc1);
    assert_eq!(layout.thread_for(Tc, 2), tc0);
    assert_eq!(layout.thread_for(Recv, 5), layout.thread_for(Recv, 2));
}

#[test]
fn single_threaded_runs_every_block_on_main() {
    let layout = ThreadLayout::single_threaded();
    assert_eq!(names(&layout), ["main", "io", "wd"]);
    for role in [Ldm, Tc, Main, Rep, Recv, Send] {
        assert_eq!(layout.thread_for(role, 3), Some(0), "{role}");
    }
    assert_eq!(layout.thread_for(Io, 0), Some(1));
    assert_eq!(layout.thread_for(Watchdog, 0), Some(2));
}

#[test]
fn unknown_thread_type_is_named_with_the_allowed_ones() {
    assert_eq!(
        refused("ldn"),
        "ThreadConfig: unknown thread type \"ldn\" at position 0; \
         allowed: ldm, tc, main, rep, recv, send, io, wd"
    );
    assert!(refused("main,recieve").contains("\"recieve\" at position 5"));
}

#[test]
fn bad_keys_values_and_syntax_are_refused_with_the_token() {
    let cases = [
        ("ldm={cpus=0}", "unknown key \"cpus\" for ldm at position 5"),
        ("ldm={count=2,count=2}", "count given twice for ldm"),
        (
            "ldm={count=four}",
            "count=four for ldm at position 11 is not valid",
        ),
        ("ldm={count=-1}", "count=-1"),
        (
            "tc={realtime=2}",
            "realtime=2 for tc at position 13 is not valid; allowed: 0 or 1",
        ),
        ("tc={spintime=abc}", "spintime=abc for tc"),
        (
            "ldm={count=4,cpubind=3-0}",
            "bad CPU list item \"3-0\" for ldm",
        ),
        ("ldm={cpubind=x}", "bad CPU list item \"x\""),
        ("ldm={cpubind=99999}", "bad CPU list item \"99999\""),
        (
            "ldm={count=2",
            "\"{\" of ldm at position 4 has no matching \"}\"",
        ),
        ("ldm={count=2,", "has no matching \"}\""),
        ("ldm={count", "has no matching \"}\""),
        ("ldm={count}", "expected \"=\" at position 10, found \"}\""),
        (
            "ldm,",
            "expected a thread type at position 4, found the end",
        ),
        (
            "ldm,,tc",
            "expected a thread type at position 4, found \",\"",
        ),
        (
            "ldm tc",
            "expected \",\" or the end at position 4, found \"tc\"",
        ),
        ("ldm=4", "expected \"{\" at position 4, found \"4\""),
        ("ldm={count=1}}", "found \"}\""),
    ];
    for (text, expected) in cases {
        let message = refused(text);
        assert!(message.starts_with("ThreadConfig: "), "{message}");
        assert!(
            message.contains(expected),
            "{text:?}: {message:?} lacks {expected:?}"
        );
    }
}

#[test]
fn ndb_rules_are_enforced() {
    assert_eq!(
        refused("ldm={count=3}"),
        "ThreadConfig: 3 ldm threads; allowed counts: 0, 1, 2, 4, 6, 8, 12, 16, 24, 32"
    );
    assert_eq!(
        refused("ldm={count=2,spintime=600}"),
        "ThreadConfig: spintime=600 for ldm is too large; allowed 0..=500 (µs)"
    );
    let cases = [
        ("ldm={count=2},ldm={count=1}", "3 ldm threads"),
        ("ldm={count=64}", "64 ldm threads"),
        ("tc={count=33}", "33 tc threads; allowed counts: 0..=32"),
        ("send={count=17}", "17 send threads; allowed counts: 0..=16"),
        ("recv={count=17}", "17 recv threads; allowed counts: 0..=16"),
        (
            "recv={count=1},recv={count=16}",
            "17 recv threads; allowed counts: 0..=16",
        ),
        ("main={count=2}", "2 main threads; allowed counts: 1"),
        ("rep,rep", "2 rep threads; allowed counts: 1"),
        ("io={count=0}", "0 io threads; allowed counts: 1"),
        ("wd={count=3}", "3 wd threads; allowed counts: 1"),
        (
            "ldm={count=2,cpubind=0-1,cpuset=2-3}",
            "entry 1 (ldm) has both cpubind and cpuset",
        ),
        (
            "main,ldm={count=4,cpubind=0-2}",
            "entry 2 (ldm) has 4 thread(s) but cpubind lists 3 CPU(s)",
        ),
        ("io={spintime=10}", "spintime for io is not allowed"),
        ("wd={spintime=0}", "spintime for wd is not allowed"),
    ];
    for (text, expected) in cases {
        let message = refused(text);
        assert!(
            message.contains(expected),
            "{text:?}: {message:?} lacks {expected:?}"
        );
    }
    for text in [
        "ldm={count=32}",
        "tc={count=32}",
        "send={count=16}",
        "recv={count=16}",
        "recv={count=0}",
        "tc={count=0}",
        "ldm={spintime=500}",
    ] {
        parse(text);
    }
}

#[test]
fn hand_made_configs_are_validated_too() {
    let config = ThreadConfig {
        groups: vec![ThreadGroup {
            count: 5,
            ..ThreadGroup::new(Ldm)
        }],
    };
    assert!(matches!(
        config.validate(),
        Err(ThreadConfigError::BadCount {
            role: Ldm,
            count: 5,
            ..
        })
    ));
}

#[test]
fn max_execution_threads_table_matches_ndb() {
    let c = |ldm, tc, send, recv| ThreadCounts {
        ldm,
        tc,
        send,
        recv,
    };
    let rows = [
        (0, c(1, 0, 0, 1)),
        (2, c(1, 0, 0, 1)),
        (3, c(1, 0, 0, 1)),
        (4, c(2, 0, 0, 1)),
        (6, c(2, 0, 0, 1)),
        (7, c(4, 0, 0, 1)),
        (8, c(4, 0, 0, 1)),
        (9, c(4, 2, 0, 1)),
        (10, c(4, 2, 1, 1)),
        (16, c(8, 3, 1, 2)),
        (24, c(12, 5, 2, 3)),
        (32, c(16, 8, 3, 3)),
        (47, c(16, 15, 7, 7)),
        (48, c(24, 12, 5, 5)),
        (63, c(24, 19, 9, 9)),
        (64, c(32, 16, 7, 7)),
        (72, c(32, 20, 8, 10)),
        (73, c(32, 20, 8, 10)),
        (u32::MAX, c(32, 20, 8, 10)),
    ];
    for (max, counts) in rows {
        assert_eq!(
            counts_for_max_execution_threads(max),
            counts,
            "MaxNoOfExecutionThreads={max}"
        );
    }
}

#[test]
fn max_execution_threads_table_is_consistent() {
    let mut previous = counts_for_max_execution_threads(0);
    for max in 0..=80 {
        let counts = counts_for_max_execution_threads(max);
        assert!(
            LDM_COUNTS_ALLOWED.contains(&counts.ldm),
            "{max}: {counts:?}"
        );
        assert!(counts.ldm >= previous.ldm, "ldm count never drops: {max}");
        let total = counts.ldm + counts.tc + counts.send + counts.recv;
        let previous_total = previous.ldm + previous.tc + previous.send + previous.recv;
        assert!(total >= previous_total, "thread count never drops: {max}");
        if (9..=72).contains(&max) {
            assert_eq!(total, max - 2, "the table leaves main and rep: {max}");
        }
        let layout = ThreadLayout::from_counts(counts);
        assert_eq!(layout.count(Ldm), counts.ldm);
        assert_eq!(layout.count(Tc), counts.tc);
        assert_eq!(layout.count(Send), counts.send);
        assert_eq!(layout.count(Recv), counts.recv);
        assert_eq!(
            layout.threads.len() as u32,
            total + 4,
            "plus main, rep, io, wd"
        );
        previous = counts;
    }
}

#[test]
fn from_counts_folds_tc_into_main_when_there_are_none() {
    let layout = ThreadLayout::from_counts(counts_for_max_execution_threads(2));
    assert_eq!(names(&layout), ["ldm0", "main", "rep", "recv0", "io", "wd"]);
    assert!(thread(&layout, "main").hosts.contains(&Tc));
    assert_eq!(layout.thread_for(Send, 0), None);
}

fn group_strategy() -> impl Strategy<Value = ThreadGroup> {
    let role = prop::sample::select(ThreadRole::ALL.to_vec());
    let cpus = prop::collection::vec(0usize..64, 1..6);
    (
        role,
        0u32..4,
        prop::option::of(cpus),
        any::<bool>(),
        prop::option::of(any::<bool>()),
        prop::option::of(0u32..=500),
    )
        .prop_map(|(role, count, cpus, bind, realtime, spintime_us)| {
            let (cpubind, cpuset) = match cpus {
                Some(cpus) if bind => (Some(cpus), None),
                Some(cpus) => (None, Some(cpus)),
                None => (None, None),
            };
            ThreadGroup {
                role,
                count,
                cpubind,
                cpuset,
                realtime,
                spintime_us,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever `Display` writes, `parse` reads back to the same groups
    /// (or refuses with the same rule `validate` gives).
    #[test]
    fn display_round_trips(groups in prop::collection::vec(group_strategy(), 0..6)) {
        let config = ThreadConfig { groups };
        let text = config.to_string();
        match config.validate() {
            Ok(()) => prop_assert_eq!(ThreadConfig::parse(&text), Ok(config)),
            Err(error) => prop_assert_eq!(ThreadConfig::parse(&text), Err(error)),
        }
    }

    /// Random text never panics the parser.
    #[test]
    fn garbage_is_refused_or_parsed_without_panic(text in "[a-z0-9={},\\- ]{0,40}") {
        if let Ok(config) = ThreadConfig::parse(&text) {
            let layout = ThreadLayout::from_thread_config(&config);
            prop_assert!(layout.count(Main) == 1);
        }
    }
}
