"""Mininet nodes that run the QCN dataplane: ``cp-switch`` as the switch, ``rp-agent`` on hosts.

``QcnSwitch`` runs ``cp-switch`` on the interfaces Mininet created for it (no OpenFlow, no
controller: start Mininet with ``controller=None`` or ``--controller none``). A port's emulated
rate and delay come from the link's ``params1``/``params2`` on the switch side::

    self.addLink(s1, h3, params1={"qcn_rate": "10mbit", "qcn_delay": "100us"})

``QcnHost`` moves the host's address from its Mininet interface to a TAP (``qcn0``, which keeps
its own MAC: the agent delivers the frames addressed to it) and runs ``rp-agent`` between the two, so that the host's applications (ping, iperf3) are
congestion-controlled by a QCN reaction point.

``topo_from_scenario(path)`` turns a testbed scenario file (``testbed/scenarios/*.toml``) into a
Mininet ``Topo``: its hosts, switches and links, with link rates divided and delays multiplied by
the scenario's time scale S (``[scenario] scale``), as the testbed's netns mode does.

From the ``mn`` command line::

    mn --custom mininet/qcn_mininet.py --switch qcn --host qcn --controller none \\
       --topo qcndumbbell,n=3,rate=10mbit

The binaries are looked up in ``$QCN_BIN_DIR`` (e.g. ``target/release``), then on ``PATH``.
"""

import os
import shutil
import time

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

from mininet.node import Host, Switch
from mininet.topo import Topo


def binary(name):
    """The path of ``cp-switch`` or ``rp-agent``."""
    d = os.environ.get("QCN_BIN_DIR")
    if d and os.access(os.path.join(d, name), os.X_OK):
        return os.path.join(d, name)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found: build it (cargo build --release) and set QCN_BIN_DIR")
    return found


def _wait_for(path, what, timeout=10.0):
    end = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > end:
            raise RuntimeError(f"{what}: control socket {path} did not appear")
        time.sleep(0.05)


class QcnSwitch(Switch):
    """A switch whose dataplane is ``cp-switch`` on the Mininet-created interfaces.

    Extra options: ``qcn_args`` (a list of further ``cp-switch`` arguments, default
    ``["--cp", "output", "--cnpv", "3"]``) and ``run_dir`` (for the control socket and the log,
    default ``/tmp``).
    """

    def __init__(self, name, qcn_args=None, run_dir="/tmp", **params):
        Switch.__init__(self, name, **params)
        self.qcn_args = list(qcn_args) if qcn_args is not None else ["--cp", "output", "--cnpv", "3"]
        self.run_dir = run_dir
        self.ctl = os.path.join(run_dir, f"qcn-{name}.sock")
        self.log = os.path.join(run_dir, f"qcn-{name}.log")
        self.daemon_pid = None

    def port_spec(self, intf):
        """``IF[,rate=R][,delay=D]`` for one interface."""
        spec = intf.name
        rate = intf.params.get("qcn_rate")
        delay = intf.params.get("qcn_delay")
        if rate:
            spec += f",rate={rate}"
        if delay:
            spec += f",delay={delay}"
        return spec

    def start(self, controllers):
        ports = [i for i in self.intfList() if i.name != "lo"]
        args = [binary("cp-switch")]
        for intf in ports:
            # The kernel must not answer on the ports: no addresses, no IPv6 autoconfiguration.
            self.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
            self.cmd(f"ip link set {intf.name} up")
            args += ["--port", self.port_spec(intf)]
        args += self.qcn_args + ["--ctl", self.ctl]
        if os.path.exists(self.ctl):
            os.unlink(self.ctl)
        out = self.cmd(" ".join(args) + f" > {self.log} 2>&1 & echo $!")
        self.daemon_pid = int(out.strip().split()[-1])
        _wait_for(self.ctl, f"cp-switch on {self.name} (log {self.log})")

    def stop(self, deleteIntfs=True):
        if self.daemon_pid:
            self.cmd(f"kill {self.daemon_pid}; wait {self.daemon_pid} 2>/dev/null")
            self.daemon_pid = None
        Switch.stop(self, deleteIntfs)

    def ctl_cmd(self, words):
        """Runs ``cp-switch ctl`` (``words`` such as ``"stats --json"``); its output."""
        return self.cmd(f"{binary('cp-switch')} ctl --socket {self.ctl} {words}")


class QcnHost(Host):
    """A host whose traffic goes through ``rp-agent``: its address moves to the TAP ``qcn0``.

    Extra options: ``line_rate`` (default ``1gbit``), ``agent_args`` (further ``rp-agent``
    arguments) and ``run_dir``.
    """

    def __init__(self, name, line_rate="1gbit", agent_args=None, run_dir="/tmp", **params):
        Host.__init__(self, name, **params)
        self.line_rate = line_rate
        self.agent_args = list(agent_args or [])
        self.run_dir = run_dir
        self.ctl = os.path.join(run_dir, f"qcn-{name}.sock")
        self.log = os.path.join(run_dir, f"qcn-{name}.log")
        self.agent_pid = None

    def config(self, **params):
        r = Host.config(self, **params)
        self.start_agent()
        return r

    def start_agent(self):
        intf = self.defaultIntf()
        ip, plen = intf.IP(), intf.prefixLen
        self.cmd(f"ip addr flush dev {intf.name}")
        self.cmd(f"sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        if os.path.exists(self.ctl):
            os.unlink(self.ctl)
        args = [binary("rp-agent"), "--uplink", intf.name, "--tap", "qcn0",
                "--tap-ip", f"{ip}/{plen}", "--line-rate", self.line_rate,
                "--ctl", self.ctl] + self.agent_args
        out = self.cmd(" ".join(args) + f" > {self.log} 2>&1 & echo $!")
        self.agent_pid = int(out.strip().split()[-1])
        _wait_for(self.ctl, f"rp-agent on {self.name} (log {self.log})")

    def terminate(self):
        if self.agent_pid:
            self.cmd(f"kill {self.agent_pid}; wait {self.agent_pid} 2>/dev/null")
            self.agent_pid = None
        Host.terminate(self)

    def ctl_cmd(self, words):
        """Runs ``rp-agent ctl`` (``words`` such as ``"stats --json"``); its output."""
        return self.cmd(f"{binary('rp-agent')} ctl --socket {self.ctl} {words}")


class QcnDumbbell(Topo):
    """``n`` senders and one receiver on one switch; the receiver's port is the bottleneck."""

    def build(self, n=3, rate="10mbit", prefix=""):
        s = self.addSwitch(f"{prefix}s1", dpid="1")
        r = self.addHost(f"{prefix}r")
        self.addLink(s, r, params1={"qcn_rate": rate})
        for i in range(int(n)):
            h = self.addHost(f"{prefix}h{i + 1}")
            self.addLink(h, s)


_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
_TIME = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def _scaled_rate(text, scale):
    """``10gbit`` ÷ 100 → ``100000000bit``."""
    t = text.strip().lower()
    for unit in sorted(_UNITS, key=len, reverse=True):
        if t.endswith(unit):
            bps = float(t[: -len(unit)]) * _UNITS[unit] / scale
            return f"{int(round(bps))}bit"
    raise ValueError(f"rate {text!r}: use bit, kbit, mbit, gbit or tbit")


def _scaled_delay(text, scale):
    """``12.5us`` × 100 → ``1250000ns``."""
    t = text.strip().lower()
    for unit in sorted(_TIME, key=len, reverse=True):
        if t.endswith(unit):
            ns = float(t[: -len(unit)]) * _TIME[unit] * 1e9 * scale
            return f"{int(round(ns))}ns"
    raise ValueError(f"delay {text!r}: use ns, us, ms or s")


class ScenarioTopo(Topo):
    """The hosts, switches and links of a testbed scenario file (rates ÷ S, delays × S)."""

    def build(self, path=None, scale=None, prefix=""):
        if tomllib is None:
            raise RuntimeError("reading scenario files needs Python 3.11 (tomllib)")
        with open(path, "rb") as f:
            sc = tomllib.load(f)
        s = float(scale if scale is not None else sc.get("scenario", {}).get("scale", 1))
        hosts = set(sc.get("host", {}))
        switches = set(sc.get("switch", {}))
        for link in sc.get("link", []):
            for end in (link["a"], link["b"]):
                if end not in hosts:
                    switches.add(end)
        for i, sw in enumerate(sorted(switches)):
            self.addSwitch(prefix + sw, dpid=str(i + 1))
        for h in sorted(hosts):
            self.addHost(prefix + h)
        for link in sc.get("link", []):
            a, b = link["a"], link["b"]
            p = {}
            if "rate" in link:
                p["qcn_rate"] = _scaled_rate(link["rate"], s)
            if "delay" in link:
                p["qcn_delay"] = _scaled_delay(link["delay"], s)
            # The emulation runs in the switch: the switch side of each link carries it.
            self.addLink(prefix + a, prefix + b,
                         params1=p if a in switches else {},
                         params2=p if b in switches else {})


def topo_from_scenario(path, scale=None, prefix=""):
    """A Mininet topology from a testbed scenario file."""
    return ScenarioTopo(path=path, scale=scale, prefix=prefix)


# For `mn --custom`.
topos = {"qcndumbbell": QcnDumbbell, "qcnscenario": ScenarioTopo}
switches = {"qcn": QcnSwitch}
hosts = {"qcn": QcnHost}
