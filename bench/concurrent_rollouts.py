#!/usr/bin/env python3
"""A DaemonSet rollout and a Deployment rollout, alone and at the same
time, over simulated nodes (a report, not a test).

Starts one `drover server` and one `drover sim --nodes N` (the helpers of
bench/sim_scale.py), applies a DaemonSet (one pod per node, maxUnavailable
--ds-max-unavailable) and a Deployment of --replicas pods (maxSurge and
maxUnavailable 25 %, 10m CPU each), waits for both to be rolled out, then
changes their image and times `drover rollout status` (from the change to
"successfully rolled out"):
  - the DaemonSet alone, then the Deployment alone;
  - both at once (each timed from the same start).
One `name: value unit` line per figure on stdout, and the slowdown of each
rollout when the other runs beside it (both / alone). Every process
started here is killed on exit; every wait has a deadline.

Usage: bench/concurrent_rollouts.py [--bin target/release/drover]
       [--nodes 1000] [--replicas 1000] [--ds-max-unavailable 10%]
"""

import argparse, os, shutil, signal, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_scale import Run, free_port  # noqa: E402


def fig(name, value, unit):
    print(f"{name}: {value:.2f} {unit}" if isinstance(value, float) else f"{name}: {value} {unit}",
          flush=True)


def manifests(replicas, ds_mu, image):
    return f"""apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: ds}}
spec:
  selector: {{matchLabels: {{app: ds}}}}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: "{ds_mu}"}}}}
  template:
    metadata: {{labels: {{app: ds}}}}
    spec:
      containers:
      - {{name: c, image: "{image}"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: dep}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: dep}}}}
  template:
    metadata: {{labels: {{app: dep}}}}
    spec:
      containers:
      - name: c
        image: "{image}"
        resources: {{requests: {{cpu: 10m}}}}
"""


class Rollouts(Run):
    def cli(self, *args, timeout=600):
        out = subprocess.run([self.bin, "--config", self.cfg] + list(args),
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise SystemExit(f"drover {' '.join(args)}: {out.stderr.strip()[:500]}")
        return out

    def status(self, target, cap):
        self.cli("rollout", "status", target, f"--timeout={cap}s", timeout=cap + 30)

    def roll(self, targets, image, cap):
        """Sets `image` on each target at once; answers each one's seconds
        from the first change to its `rollout status` returning."""
        t0 = time.monotonic()
        for t in targets:
            self.cli("set", "image", t, f"c={image}")
        took = {}

        def wait(t):
            self.status(t, cap)
            took[t] = time.monotonic() - t0
        threads = [threading.Thread(target=wait, args=(t,)) for t in targets]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if len(took) != len(targets):
            raise SystemExit(f"not every rollout finished: {took}")
        return took

    def run(self, replicas, ds_mu, cap):
        n = self.n
        grpc, http = free_port(), free_port()
        self.server = self.start(["server", "--data-dir", os.path.join(self.work, "server"),
                                  "--listen", f"127.0.0.1:{grpc}", "--http", f"127.0.0.1:{http}",
                                  "--max-connections-per-address", str(n + 1000)], "server.log")
        token = os.path.join(self.work, "server", "node-token")
        self.wait("client.yaml and node-token",
                  lambda: os.path.exists(self.cfg) and os.path.exists(token), 30)
        self.sim = self.start(["sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token,
                               "--nodes", str(n)], "sim.log")
        self.wait(f"{n} nodes Ready", lambda: self.nodes_ready(True), 600)
        path = os.path.join(self.work, "apps.yaml")
        with open(path, "w") as f:
            f.write(manifests(replicas, ds_mu, "local/busybox:1"))
        t0 = time.monotonic()
        self.cli("apply", "-f", path)
        self.status("ds/ds", cap)
        self.status("deployment/dep", cap)
        fig(f"n{n}.first_rollout_both", time.monotonic() - t0, "s")
        alone_ds = self.roll(["ds/ds"], "local/busybox:2", cap)["ds/ds"]
        fig(f"n{n}.ds_alone", alone_ds, "s")
        alone_dep = self.roll(["deployment/dep"], "local/busybox:2", cap)["deployment/dep"]
        fig(f"n{n}.deployment_alone", alone_dep, "s")
        both = self.roll(["ds/ds", "deployment/dep"], "local/busybox:3", cap)
        fig(f"n{n}.ds_beside_deployment", both["ds/ds"], "s")
        fig(f"n{n}.deployment_beside_ds", both["deployment/dep"], "s")
        fig(f"n{n}.ds_slowdown", both["ds/ds"] / alone_ds, "x")
        fig(f"n{n}.deployment_slowdown", both["deployment/dep"] / alone_dep, "x")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--replicas", type=int, default=1000)
    ap.add_argument("--ds-max-unavailable", default="10%")
    ap.add_argument("--cap", type=int, default=300, help="seconds a rollout may take")
    ap.add_argument("--max-seconds", type=int, default=1800, help="the whole run")
    a = ap.parse_args()

    def overtime(*_):
        raise SystemExit(f"--max-seconds {a.max_seconds} reached")
    signal.signal(signal.SIGALRM, overtime)
    signal.alarm(a.max_seconds)
    print(f"# machine: {os.cpu_count()} cpus; binary {a.bin}; load {open('/proc/loadavg').read().split()[:3]}",
          file=sys.stderr, flush=True)
    work = tempfile.mkdtemp(prefix=f"drover-rollouts-{a.nodes}.")
    r = Rollouts(a.bin, a.nodes, work)
    try:
        r.run(a.replicas, a.ds_max_unavailable, a.cap)
    finally:
        r.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
