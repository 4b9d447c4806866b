"""A ping and an iperf3 through a QCN bottleneck built with Mininet and the QCN nodes.

Run as root with the binaries built: ``QCN_BIN_DIR=target/release python3
mininet/check_qcn_mininet.py [PREFIX]``. Exits 0 when the checks hold, 77 when Mininet is not
installed (nothing checked), 1 otherwise. The cargo test ``testbed/tests/mininet.rs`` runs it.
"""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    from mininet.net import Mininet
    from mininet.log import setLogLevel
except ImportError as e:
    print(f"skipped: Mininet is not installed ({e})")
    sys.exit(77)

from qcn_mininet import QcnDumbbell, QcnHost, QcnSwitch, topo_from_scenario  # noqa: E402


def main():
    prefix = sys.argv[1] if len(sys.argv) > 1 else "q"
    # The daemons' control sockets and logs: a directory given by the caller (who removes it),
    # or a fresh one removed after a pass and kept, with its path printed, after a failure.
    own_dir = len(sys.argv) <= 2
    run_dir = tempfile.mkdtemp(prefix=f"qcn-mn-{prefix}-") if own_dir else sys.argv[2]
    setLogLevel("warning")

    # The converter reads the testbed's dumbbell: four senders, one receiver, one switch.
    here = os.path.dirname(os.path.abspath(__file__))
    sc = topo_from_scenario(os.path.join(here, "..", "testbed", "scenarios", "dumbbell.toml"),
                            prefix=prefix)
    assert len(sc.hosts()) == 5 and len(sc.switches()) == 1, (sc.hosts(), sc.switches())
    bottleneck = [sc.linkInfo(a, b) for a, b in sc.links()
                  if prefix + "r0" in (a, b)][0]
    # 10 Gb/s ÷ the scenario's S = 10: 1 Gb/s.
    assert bottleneck["params1"].get("qcn_rate") == "1000000000bit", bottleneck

    topo = QcnDumbbell(n=2, rate="10mbit", prefix=prefix)
    net = Mininet(topo=topo, switch=lambda n, **p: QcnSwitch(n, run_dir=run_dir, **p),
                  host=lambda n, **p: QcnHost(n, line_rate="100mbit", run_dir=run_dir, **p),
                  controller=None, autoSetMacs=True, waitConnected=False)
    failures = []
    try:
        net.start()
        h1, r = net.get(prefix + "h1"), net.get(prefix + "r")
        sw = net.get(prefix + "s1")
        ping = h1.cmd(f"ping -c 3 -i 0.2 -W 2 {r.IP()}")
        if ", 0% packet loss" not in ping:
            failures.append(f"ping: {ping}")
        r.cmd("iperf3 -s -D -1 -p 5301; "
              "for i in $(seq 100); do ss -ltn | grep -q ':5301 ' && break; sleep 0.1; done")
        out = h1.cmd(f"iperf3 -c {r.IP()} -p 5301 -t 4 -J")
        try:
            bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        except (ValueError, KeyError) as e:
            bps = None
            failures.append(f"iperf3: {e}: {out[-500:]}")
        stats = json.loads(sw.ctl_cmd("stats --json"))
        cnms = sum(cp["cnm_tx"] for cp in stats["cps"])
        agent = json.loads(h1.ctl_cmd("stats --json"))
        print(json.dumps({"iperf3_bps": bps, "switch_cnms": cnms,
                          "agent_cnms": agent.get("cnm_rx")}))
        if bps is not None and not 1e6 < bps <= 10.5e6:
            failures.append(f"iperf3 through the 10 Mb/s bottleneck: {bps} b/s")
        if cnms == 0:
            failures.append("the bottleneck's congestion point sent no CNM")
    except BaseException:
        failures.append("exception (see the traceback)")
        raise
    finally:
        net.stop()
        if own_dir and not failures:
            shutil.rmtree(run_dir, ignore_errors=True)
        elif own_dir:
            print("daemon logs kept in", run_dir)
    for f in failures:
        print("FAILED:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
