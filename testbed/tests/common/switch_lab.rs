//! The three-host switch lab of the real-network `cp-switch` tests: hosts h1-h3 (`eth0`,
//! 10.77.0.N/24) in their own namespaces, cabled by veth pairs to ports p1-p3 of a switch
//! namespace where the daemon runs. Each lab has unique names and is torn down on drop, also
//! when the test fails (the daemon's log is printed then).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use testbed::netns::{Child, Lab, Namespace};

/// The `cp-switch` binary next to the test's (built by `cargo build --workspace`).
pub fn cp_switch() -> PathBuf {
    let p = testbed::bins::path("cp-switch");
    assert!(
        p.exists(),
        "{} is not built (run `cargo build --workspace` first)",
        p.display()
    );
    p
}

/// The address of host `i` (1-based).
pub fn ip(i: usize) -> String {
    format!("10.77.0.{i}")
}

/// `cp-switch ctl --socket CTL WORDS... --json`, parsed; the daemon's refusal or an unreachable
/// socket as the error.
pub fn ctl_json(ctl: &Path, words: &[&str]) -> Result<Value, String> {
    let out = Command::new(cp_switch())
        .arg("ctl")
        .arg("--socket")
        .arg(ctl)
        .args(words)
        .arg("--json")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// The `ports[]` row named `name` of a `stats` answer.
pub fn port<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no port {name} in {stats}"))
}

/// An interface counter from sysfs inside a namespace.
pub fn counter(ns: &Namespace, ifname: &str, name: &str) -> u64 {
    ns.exec(&["cat", &format!("/sys/class/net/{ifname}/statistics/{name}")])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether the hosts keep IPv6 (and so send its neighbour discovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6 {
    On,
    /// No IPv6: no frame on the hosts' links that the test did not send.
    Off,
}

/// Three hosts h1-h3 cabled to ports p1-p3 of a switch namespace.
pub struct Net {
    pub lab: Lab,
    pub sw: Namespace,
    pub hosts: Vec<Namespace>,
    /// The lab's own directory (control socket, daemon log, test files); removed on drop.
    pub dir: PathBuf,
    pub daemon: Option<Child>,
}

impl Net {
    /// Builds the lab `tag` (the switch is not started yet).
    pub fn new(tag: &str, ipv6: Ipv6) -> Net {
        let lab = Lab::new(tag).unwrap();
        let sw = lab.ns("sw").unwrap();
        let mut hosts = Vec::new();
        for i in 1..=3 {
            let h = lab.ns(&format!("h{i}")).unwrap();
            lab.veth((&h, "eth0"), (&sw, &format!("p{i}")))
                .unwrap()
                .offloads_off()
                .unwrap()
                .up()
                .unwrap();
            h.add_addr("eth0", &format!("{}/24", ip(i))).unwrap();
            if ipv6 == Ipv6::Off {
                h.disable_ipv6().unwrap();
            }
            hosts.push(h);
        }
        let dir = std::env::temp_dir().join(lab.prefix());
        std::fs::create_dir_all(&dir).unwrap();
        Net {
            lab,
            sw,
            hosts,
            dir,
            daemon: None,
        }
    }

    /// The daemon's control socket.
    pub fn ctl_path(&self) -> PathBuf {
        self.dir.join("ctl.sock")
    }

    /// The daemon's standard output and error so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("cp-switch.log")).unwrap_or_default()
    }

    /// Starts cp-switch on `ports` (`--port` values) with `extra` arguments and waits until its
    /// control socket answers.
    pub fn start_switch(&mut self, ports: [&str; 3], extra: &[&str]) {
        let ctl = self.ctl_path();
        let log = std::fs::File::create(self.dir.join("cp-switch.log")).unwrap();
        let mut cmd = self.sw.command(cp_switch()).unwrap();
        for p in ports {
            cmd.arg("--port").arg(p);
        }
        cmd.arg("--ctl").arg(&ctl).args(extra);
        cmd.stdout(log.try_clone().unwrap()).stderr(log);
        let mut child = self.sw.spawn_command(cmd).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while ctl_json(&ctl, &["stats"]).is_err() {
            assert!(
                child.is_running() && Instant::now() < deadline,
                "cp-switch did not come up; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.daemon = Some(child);
    }

    /// The daemon's `stats` answer.
    pub fn stats(&self) -> Value {
        ctl_json(&self.ctl_path(), &["stats"]).unwrap()
    }

    /// Host `i` (1-based).
    pub fn host(&self, i: usize) -> &Namespace {
        &self.hosts[i - 1]
    }

    /// Two pings from host `from` to host `to`; whether they were answered.
    pub fn ping(&self, from: usize, to: usize) -> bool {
        self.host(from)
            .exec_output(&["ping", "-c", "2", "-i", "0.2", "-W", "2", &ip(to)])
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Octets host `i`'s interface received.
    pub fn rx_bytes(&self, i: usize) -> u64 {
        counter(self.host(i), "eth0", "rx_bytes")
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.daemon.take();
        let _ = self.lab.teardown();
        if std::thread::panicking() {
            eprintln!("cp-switch log:\n{}", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
