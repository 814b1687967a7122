#!/usr/bin/env python3
"""What W concurrent watches of pods cost the server during a DaemonSet
rollout over simulated nodes (a report, not a test).

Starts one `drover server` and one `drover sim --nodes N` (the helpers of
bench/sim_scale.py), applies a DaemonSet (one pod per node, maxUnavailable
--max-unavailable) and waits for it to be rolled out. Then, for each W of
--watchers: W raw watches of every pod (`curl -N
/api/v1/pods?watch=1&resourceVersion=0`, the JSON a `kubectl get pods -A -w
-o json` reads), a change of the DaemonSet's image, `drover rollout status`
until it is rolled out, and the watches stopped. Per W, one `name: value
unit` line per figure: the rollout's seconds, the server's CPU seconds
during it (/proc/PID/stat), its RSS after it, the lines every watcher got
(summed), and the server's `drover_watch_*` counters over the step (changes
into the watch cache, JSON encodings, events sent, decodes from the store).
Every process started here is killed on exit; every wait has a deadline.

Usage: bench/watch_scale.py [--bin target/release/drover] [--nodes 1000]
       [--watchers 0,1,10,50] [--max-unavailable 10%]
"""

import argparse, os, re, shutil, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_scale import Run, free_port, cpu_s, rss_mib  # noqa: E402


def fig(name, value, unit):
    print(f"{name}: {value:.2f} {unit}" if isinstance(value, float) else f"{name}: {value} {unit}",
          flush=True)


def manifest(mu, image):
    return f"""apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: ds}}
spec:
  selector: {{matchLabels: {{app: ds}}}}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: "{mu}"}}}}
  template:
    metadata: {{labels: {{app: ds}}}}
    spec:
      containers:
      - {{name: c, image: "{image}"}}
"""


COUNTERS = ["drover_watch_cache_events_total", "drover_watch_cache_encodes_total",
            "drover_watch_cache_sent_total", "drover_watch_cache_expired_total",
            "drover_watch_store_decodes_total"]


class Watches(Run):
    def cli(self, *args, timeout=600):
        out = subprocess.run([self.bin, "--config", self.cfg] + list(args),
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise SystemExit(f"drover {' '.join(args)}: {out.stderr.strip()[:500]}")
        return out

    def curl(self, path, out):
        return ["curl", "-sN", "--cacert", self.ca, "-H", f"Authorization: Bearer {self.token}",
                "-o", out, f"https://127.0.0.1:{self.http}{path}"]

    def counters(self):
        path = os.path.join(self.work, "metrics.txt")
        subprocess.run(self.curl("/metrics", path), timeout=30, check=True)
        text = open(path).read()
        found = {}
        for name in COUNTERS:
            m = re.search(rf"^{name} (\d+)", text, re.M)
            found[name] = int(m.group(1)) if m else 0
        return found

    def read_credentials(self):
        import base64, yaml
        cfg = yaml.safe_load(open(os.path.join(self.work, "server", "kubeconfig")))
        self.token = cfg["users"][0]["user"]["token"]
        self.ca = os.path.join(self.work, "ca.pem")
        with open(self.ca, "wb") as f:
            f.write(base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]))

    def run(self, watchers, mu, cap):
        n = self.n
        grpc, self.http = free_port(), free_port()
        self.server = self.start(["server", "--data-dir", os.path.join(self.work, "server"),
                                  "--listen", f"127.0.0.1:{grpc}", "--http", f"127.0.0.1:{self.http}",
                                  "--max-connections-per-address", str(n + 1000)], "server.log")
        token = os.path.join(self.work, "server", "node-token")
        kubeconfig = os.path.join(self.work, "server", "kubeconfig")
        self.wait("client.yaml, node-token and kubeconfig",
                  lambda: all(os.path.exists(p) for p in (self.cfg, token, kubeconfig)), 30)
        self.read_credentials()
        self.sim = self.start(["sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token,
                               "--nodes", str(n)], "sim.log")
        self.wait(f"{n} nodes Ready", lambda: self.nodes_ready(True), 600)
        path = os.path.join(self.work, "ds.yaml")
        with open(path, "w") as f:
            f.write(manifest(mu, "local/busybox:1"))
        self.cli("apply", "-f", path)
        self.cli("rollout", "status", "ds/ds", f"--timeout={cap}s", timeout=cap + 30)
        for step, w in enumerate(watchers):
            outs = [os.path.join(self.work, f"w{step}.{i}.out") for i in range(w)]
            procs = [subprocess.Popen(self.curl("/api/v1/pods?watch=1&resourceVersion=0", o),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for o in outs]

            def lines():
                total = 0
                for o in outs:
                    try:
                        with open(o, "rb") as f:
                            total += f.read().count(b"\n")
                    except FileNotFoundError:
                        pass
                return total
            # Every watcher has its first list (n pods as ADDED).
            self.wait(f"{w} watchers listed", lambda: lines() >= w * n, 300)
            before = self.counters()
            cpu0, t0 = cpu_s(self.server.pid), time.monotonic()
            self.cli("set", "image", "ds/ds", f"c=local/busybox:{step + 2}")
            self.cli("rollout", "status", "ds/ds", f"--timeout={cap}s", timeout=cap + 30)
            took, cpu = time.monotonic() - t0, cpu_s(self.server.pid) - cpu0
            # The watchers get the rollout's last changes.
            time.sleep(1)
            after = self.counters()
            got = lines() - w * n
            for p in procs:
                p.kill()
                p.wait()
            fig(f"n{n}.w{w}.rollout", took, "s")
            fig(f"n{n}.w{w}.server_cpu", cpu, "s")
            fig(f"n{n}.w{w}.server_rss", rss_mib(self.server.pid), "MiB")
            fig(f"n{n}.w{w}.lines_received", got, "lines")
            for name in COUNTERS:
                short = name.replace("drover_watch_", "").replace("_total", "")
                fig(f"n{n}.w{w}.{short}", after[name] - before[name], "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--watchers", default="0,1,10,50")
    ap.add_argument("--max-unavailable", default="10%")
    ap.add_argument("--cap", type=int, default=600, help="seconds a rollout may take")
    ap.add_argument("--max-seconds", type=int, default=3600, help="the whole run")
    a = ap.parse_args()

    def overtime(*_):
        raise SystemExit(f"--max-seconds {a.max_seconds} reached")
    signal.signal(signal.SIGALRM, overtime)
    signal.alarm(a.max_seconds)
    print(f"# machine: {os.cpu_count()} cpus; binary {a.bin}; load {open('/proc/loadavg').read().split()[:3]}",
          file=sys.stderr, flush=True)
    work = tempfile.mkdtemp(prefix=f"drover-watches-{a.nodes}.")
    r = Watches(a.bin, a.nodes, work)
    try:
        r.run([int(w) for w in a.watchers.split(",")], a.max_unavailable, a.cap)
        print(f"# load after: {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr, flush=True)
    finally:
        r.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
