//! Real-network tests of the namespace layer. Run as root; otherwise each prints why it skips.
//! They run in parallel with each other: every lab has unique names.
#![allow(clippy::unwrap_used)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use testbed::netns::{self, can_run_network_tests, list_namespaces, Lab, Namespace};

fn listed(prefix: &str) -> Vec<String> {
    list_namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

fn root_link_exists(name: &str) -> bool {
    Namespace::root().has_link(name).unwrap()
}

#[test]
fn lab_creates_and_removes_everything() {
    if !can_run_network_tests("lab_creates_and_removes_everything") {
        return;
    }
    let lab = Lab::new("t").unwrap();
    let prefix = format!("{}-", lab.prefix());
    let h1 = lab.ns("h1").unwrap();
    let h2 = lab.ns("h2").unwrap();
    let sw = lab.ns("sw").unwrap();
    assert!(lab.ns("h1").is_err(), "duplicate names are refused");
    lab.veth((&h1, "eth0"), (&sw, "p1"))
        .unwrap()
        .offloads_off()
        .unwrap()
        .mtu(1500)
        .unwrap()
        .up()
        .unwrap();
    lab.veth((&h2, "eth0"), (&sw, "p2"))
        .unwrap()
        .offloads_off()
        .unwrap()
        .up()
        .unwrap();
    sw.add_bridge("br0", &["p1", "p2"]).unwrap();
    sw.offloads_off("br0").unwrap();
    let root = lab.veth_root((&h1, "mgmt")).unwrap();
    let root_if = root.b.1.clone();
    assert!(root_if.len() <= 15);
    assert!(root_link_exists(&root_if));
    h1.set_mac("eth0", "02:00:00:00:00:01").unwrap();
    assert_eq!(h1.mac("eth0").unwrap(), [2, 0, 0, 0, 0, 1]);
    h1.add_addr("eth0", "10.9.0.1/24").unwrap();
    h2.add_addr("eth0", "10.9.0.2/24").unwrap();
    let state = lab.state_path().to_owned();
    assert!(state.exists());
    let rec = netns::state::read_record(&state).unwrap();
    assert_eq!(rec.namespaces.len(), 3);
    assert_eq!(rec.root_links, vec![root_if.clone()]);

    // Traffic through the bridge, if ping is installed.
    if let Ok(out) = h1.exec_output(&["ping", "-c", "1", "-W", "2", "10.9.0.2"]) {
        if !String::from_utf8_lossy(&out.stderr).contains("No such file") {
            assert!(out.status.success(), "ping through the bridge: {out:?}");
        }
    }

    assert_eq!(listed(&prefix).len(), 3);
    drop(lab);
    assert!(listed(&prefix).is_empty(), "left: {:?}", listed(&prefix));
    assert!(!root_link_exists(&root_if));
    assert!(!state.exists());
    assert!(h1.is_deleted());
    assert!(
        h1.exec(&["true"]).is_err(),
        "a deleted namespace refuses commands"
    );
}

#[test]
fn teardown_after_panic_in_test_body() {
    if !can_run_network_tests("teardown_after_panic_in_test_body") {
        return;
    }
    let mut prefix = String::new();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let lab = Lab::new("panic").unwrap();
        prefix = format!("{}-", lab.prefix());
        let a = lab.ns("a").unwrap();
        let b = lab.ns("b").unwrap();
        lab.veth((&a, "x"), (&b, "y")).unwrap().up().unwrap();
        let _daemon = a.spawn(&["sleep", "30"]).unwrap();
        assert_eq!(listed(&prefix).len(), 2);
        panic!("test body fails");
    }));
    assert!(result.is_err());
    assert!(!prefix.is_empty());
    assert!(listed(&prefix).is_empty(), "left: {:?}", listed(&prefix));
}

#[test]
fn child_guard_kills_process_group() {
    if !can_run_network_tests("child_guard_kills_process_group") {
        return;
    }
    let lab = Lab::new("child").unwrap();
    let ns = lab.ns("n").unwrap();
    // A shell whose own child would outlive a plain kill of the shell.
    let mut child = ns
        .spawn(&["sh", "-c", "sleep 60 & sleep 60; wait"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.is_running());
    let pids = ns.pids().unwrap();
    assert!(
        pids.len() >= 2,
        "shell and its sleeps are in the namespace: {pids:?}"
    );
    drop(child);
    assert!(ns.pids().unwrap().is_empty(), "whole group gone");

    // A process still running when the lab goes is killed by the lab.
    let mut survivor = ns.spawn(&["sleep", "60"]).unwrap();
    let pid = survivor.id();
    drop(lab);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        survivor.try_wait().unwrap().is_some(),
        "{pid} killed by teardown"
    );
}

#[test]
fn exec_reports_failures() {
    if !can_run_network_tests("exec_reports_failures") {
        return;
    }
    let lab = Lab::new("exec").unwrap();
    let ns = lab.ns("n").unwrap();
    assert_eq!(ns.exec(&["echo", "hi"]).unwrap(), "hi\n");
    let err = ns.exec(&["sh", "-c", "echo oops >&2; exit 3"]).unwrap_err();
    assert!(err.to_string().contains("oops"), "{err}");
    // The namespace is really separate: only lo exists.
    let links = ns.ip(&["-o", "link", "show"]).unwrap();
    assert_eq!(links.lines().count(), 1, "{links}");
    assert!(ns.set_up("nope0").is_err());

    // sysctls are per namespace.
    let root_before = std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/disable_ipv6").ok();
    ns.disable_ipv6().unwrap();
    let inside = ns
        .exec(&["cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"])
        .unwrap();
    assert_eq!(inside.trim(), "1");
    let root_after = std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/disable_ipv6").ok();
    assert_eq!(root_before, root_after);
    assert!(ns.sysctl("../../etc/x", "1").is_err());
}

#[test]
fn many_labs_in_parallel() {
    if !can_run_network_tests("many_labs_in_parallel") {
        return;
    }
    let threads: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let lab = Lab::new("par").unwrap();
                let a = lab.ns("a").unwrap();
                let b = lab.ns("b").unwrap();
                lab.veth((&a, "eth0"), (&b, "eth0")).unwrap().up().unwrap();
                lab.veth_root((&a, "up")).unwrap();
                let p = format!("{}-", lab.prefix());
                assert_eq!(listed(&p).len(), 2, "thread {i}");
                p
            })
        })
        .collect();
    for t in threads {
        let p = t.join().unwrap();
        assert!(listed(&p).is_empty());
    }
}

#[test]
fn down_removes_leftovers_of_dead_runs() {
    if !can_run_network_tests("down_removes_leftovers_of_dead_runs") {
        return;
    }
    // A pid that is not running stands for a crashed run.
    let dead = (100_000..4_000_000u32)
        .step_by(7919)
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let name = format!("qtb-{dead}-0-crash-{}-h1", std::process::id());
    let ns = Namespace::create(&name).unwrap();
    let mut sleeper = ns.spawn(&["sleep", "60"]).unwrap();
    std::mem::forget(ns);

    let dry = netns::state::down(false, true).unwrap();
    assert!(dry.namespaces.contains(&name), "{dry:?}");
    assert!(list_namespaces().unwrap().contains(&name));

    let report = netns::state::down(false, false).unwrap();
    assert!(report.namespaces.contains(&name), "{report:?}");
    assert!(!list_namespaces().unwrap().contains(&name));
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        sleeper.try_wait().unwrap().is_some(),
        "process in it killed"
    );

    // Labs of live processes (this one) are never touched.
    let lab = Lab::new("live").unwrap();
    lab.ns("a").unwrap();
    let report = netns::state::down(false, false).unwrap();
    assert!(!report
        .namespaces
        .iter()
        .any(|n| n.starts_with(lab.prefix())));
    assert_eq!(listed(&format!("{}-", lab.prefix())).len(), 1);
}
