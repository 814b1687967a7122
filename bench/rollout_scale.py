#!/usr/bin/env python3
"""Rolling updates over N simulated nodes (a report, not a test).

Starts one `drover server` and one `drover sim --nodes N` (the helpers of
bench/sim_scale.py), then for each update strategy:
  - applies a DaemonSet (image app:1) and waits for `drover rollout status`
    and for all N pods Running and Ready (checked once on the pods);
  - applies the same DaemonSet with image app:2 and measures the time from
    that apply until the DaemonSet's status says updatedNumberScheduled =
    numberAvailable = desiredNumberScheduled = N for the new generation, as
    seen on a `drover get ds -w` stream timestamped here (what `rollout
    status` reads, without its 250 ms polling), and until `drover rollout
    status ds/NAME` returns; then checks once that every pod runs app:2 with
    the new revision hash and is Running and Ready;
  - the leader's controller passes over the rollout (from /metrics, with the
    admin token): how many, per node, how many were skipped (woken only by
    the controller's own status writes), their mean time, and the share of
    the rollout the controller's loop was busy;
  - the CPU time (utime+stime, /proc/PID/stat) of the server and of the sim
    process over the rollout, in seconds and in % of one core, and their RSS
    after it;
  - deletes the DaemonSet and waits until its pods are gone.
A rollout still unfinished after --cap seconds is stopped there and its
rate (new pods scheduled per second) is reported instead of its duration.
One `name: value unit` line per figure on stdout. Every process started here
is killed on exit, on error, on Ctrl-C, on SIGTERM and at --max-seconds.

Usage: bench/rollout_scale.py [--bin target/release/drover] [--nodes 1000]
       [--strategies mu1,mu10,mu100,surge10] [--cap 600] [--max-seconds 2400]
(DROVER_LOG=debug in the environment reaches the server; --keep-workdir
keeps its log.)
"""
import argparse, json, os, shutil, signal, ssl, subprocess, sys, tempfile, threading, time, urllib.request

from sim_scale import Run, Watcher, rss_mib

# name -> (description, spec.updateStrategy.rollingUpdate)
STRATEGIES = {
    "mu1": ("maxUnavailable 1", {"maxUnavailable": 1}),
    "mu10": ('maxUnavailable "10%"', {"maxUnavailable": "10%"}),
    "mu100": ('maxUnavailable "100%"', {"maxUnavailable": "100%"}),
    "surge10": ('maxSurge "10%", maxUnavailable 0', {"maxSurge": "10%", "maxUnavailable": 0}),
}

TICK = os.sysconf("SC_CLK_TCK")


def fig(name, value, unit):
    print(f"{name}: {value:.2f} {unit}" if isinstance(value, float) else f"{name}: {value} {unit}",
          flush=True)


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def manifest(name, rolling, tag):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": f"app:{tag}"}]}}}}


class Rows(Watcher):
    """Every row of a `drover get ds -w` stream, timestamped."""

    def __init__(self, argv):
        super().__init__(argv, lambda c: False)
        self.rows = []

    def run(self):
        for line in self.p.stdout:
            cols = line.split()
            if cols and cols[0] != "NAME":
                self.rows.append((time.monotonic(), cols))


class Lines(threading.Thread):
    """A process's stdout lines, timestamped."""

    def __init__(self, p):
        super().__init__(daemon=True)
        self.p, self.lines = p, []

    def run(self):
        for line in self.p.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))


class Rollouts(Run):
    def __init__(self, binary, n, work, cap):
        super().__init__(binary, n, work)
        self.cap = cap

    def cli(self, *args, timeout=120, check=True):
        out = subprocess.run([self.bin, "--config", self.cfg] + list(args),
                             capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise SystemExit(f"drover {' '.join(args)}: {out.stderr.strip()}")
        return out

    def get_ds(self, name):
        return json.loads(self.cli("get", "ds", name, "-o", "json").stdout)

    def apply(self, name, rolling, tag):
        path = os.path.join(self.work, f"{name}.json")
        with open(path, "w") as f:
            json.dump(manifest(name, rolling, tag), f)
        self.cli("apply", "-f", path, timeout=60)

    def rollout_status(self, name, timeout_s):
        """Starts `drover rollout status ds/NAME --timeout`, its lines read
        by a thread."""
        p = subprocess.Popen([self.bin, "--config", self.cfg, "rollout", "status", f"ds/{name}",
                              "--timeout", f"{int(timeout_s)}s"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        t = Lines(p)
        t.start()
        return p, t

    def commit_index(self):
        """The member's raft commit index (`drover cluster status`)."""
        rows = self.cli("cluster", "status").stdout.splitlines()
        head = rows[0].split()
        return int(rows[1].split()[head.index("COMMIT")])

    def controller_passes(self):
        """(count, seconds, skipped, judged, planned) of
        `drover_controller_pass_duration_seconds`, `drover_controller_passes_skipped_total`,
        `drover_controller_nodes_judged_total` and
        `drover_controller_daemon_nodes_planned_total` on the server's /metrics
        (0 for a server without it): HTTPS on the --http port, the admin
        token and the cluster CA from client.yaml."""
        token, ca, in_ca = None, [], False
        for line in open(self.cfg):
            if in_ca and line.startswith("  "):
                ca.append(line[2:])
                continue
            in_ca = False
            if line.startswith("token:"):
                token = line.split(":", 1)[1].strip()
            elif line.startswith("ca: |"):
                in_ca = True
        ctx = ssl.create_default_context(cadata="".join(ca))
        ctx.check_hostname = False  # loopback; the chain is still checked against the cluster CA
        req = urllib.request.Request(f"https://127.0.0.1:{self.http}/metrics",
                                     headers={"authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            text = r.read().decode()
        got = {}
        for line in text.splitlines():
            for key in ("count", "sum"):
                if line.startswith(f"drover_controller_pass_duration_seconds_{key} "):
                    got[key] = float(line.split()[1])
            if line.startswith("drover_controller_passes_skipped_total "):
                got["skipped"] = float(line.split()[1])
            if line.startswith("drover_controller_nodes_judged_total "):
                got["judged"] = float(line.split()[1])
            if line.startswith("drover_controller_daemon_nodes_planned_total "):
                got["planned"] = float(line.split()[1])
        return (got.get("count", 0.0), got.get("sum", 0.0), got.get("skipped", 0.0),
                got.get("judged", 0.0), got.get("planned", 0.0))

    def pod_count(self):
        return len(self.cli("get", "pods", "-A", "-o", "name").stdout.split())

    def run(self):
        n = self.n
        print(f"# load at start: {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr, flush=True)
        self.server, grpc, token = self.start_server()
        t0 = time.monotonic()
        self.sim = self.start(["sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token,
                               "--nodes", str(n)], "sim.log")
        self.wait(f"{n} nodes Ready", lambda: self.nodes_ready(True), 600)
        fig(f"n{n}.join_all_ready", time.monotonic() - t0, "s")
        for key in self.strategies:
            self.one(key, *STRATEGIES[key])
        print(f"# load at end: {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr, flush=True)

    def one(self, name, desc, rolling):
        n, prefix = self.n, f"{name}."
        print(f"# {name}: {desc}; load {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        self.apply(name, rolling, 1)
        p, _ = self.rollout_status(name, 300)
        if p.wait(timeout=330) != 0:
            raise SystemExit(f"{name}: the first revision did not roll out in 300 s")
        self.wait(f"{n} pods Running and Ready", self.pods_ready, 60)
        fig(prefix + "create_to_all_ready", time.monotonic() - t0, "s")
        old_hash = {p["metadata"]["labels"].get("controller-revision-hash")
                    for p in self.drover_json("get", "pods", "-A")}

        rows = Rows([self.bin, "--config", self.cfg, "get", "ds", "-w"])
        self.procs.append(rows.p)
        rows.start()
        time.sleep(1.0)  # the watch is established and has printed its table
        commit0 = self.commit_index()
        passes0 = self.controller_passes()
        srv_cpu0, sim_cpu0 = cpu_seconds(self.server.pid), cpu_seconds(self.sim.pid)
        t0 = time.monotonic()
        self.apply(name, rolling, 2)
        p, lines = self.rollout_status(name, self.cap)
        rc = p.wait(timeout=self.cap + 60)
        t_status = time.monotonic()
        srv_cpu, sim_cpu = cpu_seconds(self.server.pid) - srv_cpu0, cpu_seconds(self.sim.pid) - sim_cpu0
        st = self.get_ds(name).get("status", {})  # where a capped rollout stands
        t_read = time.monotonic()
        commit = self.commit_index() - commit0
        passes1 = self.controller_passes()
        time.sleep(0.5)  # the last rows of the watch
        rows.stop()
        mine = [(t - t0, c) for (t, c) in rows.rows if c[0] == name and t0 <= t <= t_read and len(c) >= 6]
        # NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE ...: done once the
        # new generation was seen (UP-TO-DATE < N) and then all equal N.
        started = next((i for i, (_, c) in enumerate(mine) if int(c[4]) < n), None)
        done = None
        if started is not None:
            done = next((t for (t, c) in mine[started:]
                         if c[1] == c[4] == c[5] == str(n)), None)
        if started is not None:  # the progress, as the watch saw it
            for frac in (10, 50, 90):
                at = next((t for (t, c) in mine[started:] if int(c[4]) * 100 >= frac * n), None)
                if at is not None:
                    fig(prefix + f"updated_{frac}pct_at", at, "s")
        if rc == 0 and done is not None:
            fig(prefix + "rollout_apply_to_done_watch", done, "s")
            fig(prefix + "rollout_apply_to_status_returned", t_status - t0, "s")
            span = done
            fig(prefix + "rollout_rate", n / span, "nodes/s")
        else:
            span = t_read - t0
            updated = st.get("updatedNumberScheduled", 0)
            tail = lines.lines[-1][1] if lines.lines else ""
            print(f"# {name}: not done after {span:.0f} s (rollout status exit {rc}): {tail}",
                  file=sys.stderr, flush=True)
            fig(prefix + "rollout_capped_after", span, "s")
            fig(prefix + "rollout_updated_at_cap", updated, "pods")
            fig(prefix + "rollout_rate", updated / span, "nodes/s")
            # steady rate: between the first and the last row of the watch
            # that moved UP-TO-DATE
            moves = [(t, int(c[4])) for (t, c) in mine[started or 0:]]
            if len(moves) >= 2 and moves[-1][0] > moves[0][0]:
                fig(prefix + "rollout_rate_watch",
                    (moves[-1][1] - moves[0][1]) / (moves[-1][0] - moves[0][0]), "nodes/s")
            if updated:
                fig(prefix + "rollout_projected_total", n * span / updated, "s")
        fig(prefix + "server_cpu", srv_cpu, "s")
        # CPU was read when `rollout status` returned
        fig(prefix + "server_cpu_pct", 100.0 * srv_cpu / (t_status - t0), "% of a core")
        fig(prefix + "sim_cpu", sim_cpu, "s")
        fig(prefix + "sim_cpu_pct", 100.0 * sim_cpu / (t_status - t0), "% of a core")
        fig(prefix + "raft_entries_committed", commit, "entries")
        # The leader's controller loop: how many passes the rollout took and
        # how much of its time the loop was busy (a pass plans every node).
        passes, busy = passes1[0] - passes0[0], passes1[1] - passes0[1]
        fig(prefix + "controller_passes", int(passes), "passes")
        fig(prefix + "controller_passes_per_node", passes / n, "passes")
        # Passes not run: woken only by the controller's own status writes.
        fig(prefix + "controller_passes_skipped", int(passes1[2] - passes0[2]), "passes")
        if passes:
            fig(prefix + "controller_pass_mean", 1e3 * busy / passes, "ms")
            # Nodes the node lifecycle judged (0 for a server without the
            # counter): a pass judges those whose verdict may have changed.
            fig(prefix + "controller_nodes_judged_per_pass", (passes1[3] - passes0[3]) / passes, "nodes")
            # Nodes the DaemonSet's plans diffed (with a memo, those that changed).
            fig(prefix + "controller_daemon_nodes_planned_per_pass", (passes1[4] - passes0[4]) / passes, "nodes")
        fig(prefix + "controller_busy_pct", 100.0 * busy / (t_status - t0), "% of the rollout")
        fig(prefix + "server_rss_after", rss_mib(self.server.pid), "MiB")
        fig(prefix + "sim_rss_after", rss_mib(self.sim.pid), "MiB")
        fig(prefix + "status_desired_updated_available",
            f"{st.get('desiredNumberScheduled')}/{st.get('updatedNumberScheduled')}/{st.get('numberAvailable')}",
            "")
        # Checked once on the pods themselves.
        pods = [p for p in self.drover_json("get", "pods", "-A")
                if p["metadata"].get("labels", {}).get("app") == name]
        def ready(p):
            return p.get("status", {}).get("phase") == "Running" and any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in p.get("status", {}).get("conditions", []))
        new = [p for p in pods if p["spec"]["containers"][0]["image"] == "app:2"]
        hashes = {p["metadata"]["labels"].get("controller-revision-hash") for p in new}
        fig(prefix + "pods_total", len(pods), "pods")
        fig(prefix + "pods_new_running_ready", sum(1 for p in new if ready(p)), "pods")
        fig(prefix + "new_pods_hashes", f"{len(hashes)} (old {sorted(old_hash)}, new {sorted(hashes)})", "")
        nodes = {p["spec"].get("nodeName") for p in new}
        fig(prefix + "nodes_with_a_new_pod", len(nodes), "nodes")

        t0 = time.monotonic()
        self.cli("delete", "ds", name)
        def gone():
            time.sleep(0.45)
            return self.pod_count() == 0
        self.wait(f"{name}: pods gone", gone, 300)
        fig(prefix + "delete_to_pods_gone", time.monotonic() - t0, "s")
        fig(prefix + "events_stored", len(self.cli("get", "events", "-A", "-o", "name").stdout.split()),
            "events")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--strategies", default=",".join(STRATEGIES),
                    # argparse formats help with %: a percentage in a strategy's name must be %%.
                    help="among " + ", ".join(f"{k} ({v[0]})" for k, v in STRATEGIES.items()).replace("%", "%%"))
    ap.add_argument("--cap", type=int, default=600, help="seconds a rollout may take before it is stopped")
    ap.add_argument("--max-seconds", type=int, default=2400, help="the whole run")
    ap.add_argument("--keep-workdir", action="store_true")
    a = ap.parse_args()
    keys = a.strategies.split(",")
    for k in keys:
        if k not in STRATEGIES:
            ap.error(f"unknown strategy {k!r}")
    def overtime(*_):
        raise SystemExit(f"--max-seconds {a.max_seconds} reached")
    signal.signal(signal.SIGALRM, overtime)
    signal.alarm(a.max_seconds)
    print(f"# machine: {os.cpu_count()} cpus; binary {a.bin}", file=sys.stderr)
    work = tempfile.mkdtemp(prefix=f"drover-rollout-{a.nodes}.")
    r = Rollouts(a.bin, a.nodes, work, a.cap)
    r.strategies = keys
    try:
        r.run()
    finally:
        r.close()
        if a.keep_workdir:
            print(f"# kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
