#!/usr/bin/env python3
"""The scheduler at scale with simulated nodes (a report, not a test).

Starts one `drover server` and one `drover sim --nodes N` (the helpers of
bench/sim_scale.py), waits for N nodes Ready, then:
  - bare: --pods bare Pods (no spec.nodeName, each requesting 10m CPU),
    applied as files of --per-file pods (one `drover apply` per file,
    --parallel of them at once); measured from the first apply's start
    to all bound and to all Running, as the server's own metrics say
    (`drover_scheduler_pods_bound_total`, `drover_pods{phase="Running"}`,
    scraped every 20 ms from /metrics with the admin token of
    DATA_DIR/client.yaml): pods/s bound and Running, and the apply alone;
  - anti: then --anti Pods with required podAntiAffinity on
    kubernetes.io/hostname (one per node at most), applied the same way
    beside the bare ones: time from the apply to all bound;
  - deployment, deployment_anti (--deployment, --deployment-anti): then
    one Deployment of that many replicas (10m CPU each; the second with
    the same required hostname anti-affinity), applied as one file: its
    ReplicaSet creates the pods and the scheduler binds them, measured as
    above;
  - the server's CPU time and RSS after each.
One `name: value unit` line per figure on stdout. Every process started here
is killed on exit; every wait has a deadline.

Usage: bench/schedule_scale.py [--bin target/release/drover] [--nodes 1000]
       [--pods 10000] [--anti 1000] [--deployment 0] [--deployment-anti 0]
       [--per-file 500] [--parallel 4]
"""
import argparse, os, shutil, signal, socket, ssl, subprocess, sys, tempfile, time

from sim_scale import Run, free_port, rss_mib

TICK = os.sysconf("SC_CLK_TCK")


def fig(name, value, unit):
    print(f"{name}: {value:.2f} {unit}" if isinstance(value, float) else f"{name}: {value} {unit}",
          flush=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pod(name, app, anti):
    """One Pod as YAML (drover reads a file that starts with `{` as one
    JSON document)."""
    affinity = ""
    if anti:
        affinity = (
            "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
            f"      - labelSelector: {{matchLabels: {{app: {app}}}}}\n"
            "        topologyKey: kubernetes.io/hostname\n")
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {app}}}}}\nspec:\n"
            f"{affinity}  containers:\n  - name: c\n    image: local/busybox:1\n"
            "    resources: {requests: {cpu: 10m}}\n")


def deployment(name, replicas, anti):
    """One Deployment of `replicas` pods of `pod`'s template."""
    affinity = ""
    if anti:
        affinity = (
            "      affinity:\n        podAntiAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n"
            f"          - labelSelector: {{matchLabels: {{app: {name}}}}}\n"
            "            topologyKey: kubernetes.io/hostname\n")
    return (f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n"
            f"  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n"
            f"    metadata: {{labels: {{app: {name}}}}}\n    spec:\n{affinity}"
            "      containers:\n      - name: c\n        image: local/busybox:1\n"
            "        resources: {requests: {cpu: 10m}}\n")


class Metrics:
    """The server's /metrics over TLS with the admin token and the CA of
    its DATA_DIR/client.yaml."""

    def __init__(self, work, http_port):
        lines = open(os.path.join(work, "server", "client.yaml")).read().splitlines()
        self.token = next(l.split(":", 1)[1].strip() for l in lines if l.startswith("token:"))
        start = lines.index("ca: |") + 1
        ca = []
        for l in lines[start:]:
            if not l.startswith("  "):
                break
            ca.append(l[2:])
        ca_path = os.path.join(work, "ca.pem")
        with open(ca_path, "w") as f:
            f.write("\n".join(ca) + "\n")
        self.ctx = ssl.create_default_context(cafile=ca_path)
        self.port = http_port

    def scrape(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw:
            with self.ctx.wrap_socket(raw, server_hostname="drover-server") as s:
                s.sendall((f"GET /metrics HTTP/1.1\r\nHost: drover\r\nAuthorization: Bearer {self.token}\r\n"
                           "Connection: close\r\n\r\n").encode())
                chunks = []
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    chunks.append(b)
        body = b"".join(chunks).decode(errors="replace")
        out = {}
        for line in body.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            k, v = line.rsplit(" ", 1)
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out


class Scale(Run):
    def cli(self, *args, timeout=300):
        out = subprocess.run([self.bin, "--config", self.cfg] + list(args),
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise SystemExit(f"drover {' '.join(args[:3])}: {out.stderr.strip()[:500]}")
        return out

    def start_server(self):
        # sim_scale's server, remembering its HTTP port (for /metrics).
        grpc, http = free_port(), free_port()
        server = self.start(["server", "--data-dir", os.path.join(self.work, "server"),
                             "--listen", f"127.0.0.1:{grpc}", "--http", f"127.0.0.1:{http}",
                             "--node-timeout", "5s",
                             "--max-connections-per-address", str(self.n + 1000)],
                            "server.log")
        token = os.path.join(self.work, "server", "node-token")
        self.wait("client.yaml and node-token",
                  lambda: os.path.exists(self.cfg) and os.path.exists(token), 30)
        return server, grpc, token, http

    def write_files(self, prefix, app, count, anti, per_file):
        paths = []
        for start in range(0, count, per_file):
            path = os.path.join(self.work, f"{prefix}-{start}.yaml")
            with open(path, "w") as f:
                f.write("---\n".join(pod(f"{prefix}-{i}", app, anti)
                                      for i in range(start, min(count, start + per_file))))
            paths.append(path)
        return paths

    def wave(self, label, paths, count, metrics, want_running, cap):
        base = metrics.scrape()
        bound0 = base.get("drover_scheduler_pods_bound_total", 0.0)
        running0 = base.get('drover_pods{phase="Running"}', 0.0)
        cpu0 = cpu_seconds(self.server.pid)
        t0 = time.monotonic()
        pending = list(paths)
        applies = []

        def launch():
            while pending and sum(1 for a in applies if a.poll() is None) < self.parallel:
                a = subprocess.Popen([self.bin, "--config", self.cfg, "apply", "-f", pending.pop(0)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                applies.append(a)
                self.procs.append(a)
        launch()
        t_bound = t_running = t_applied = None
        while time.monotonic() - t0 < cap:
            launch()
            if t_applied is None and not pending and all(a.poll() is not None for a in applies):
                t_applied = time.monotonic() - t0
                for a in applies:
                    if a.returncode != 0:
                        raise SystemExit(f"{label}: apply failed: {a.stderr.read()[:500]}")
            m = metrics.scrape()
            if t_bound is None and m.get("drover_scheduler_pods_bound_total", 0.0) - bound0 >= count:
                t_bound = time.monotonic() - t0
            if want_running and t_running is None and \
                    m.get('drover_pods{phase="Running"}', 0.0) - running0 >= count:
                t_running = time.monotonic() - t0
            if t_bound is not None and t_applied is not None and (t_running is not None or not want_running):
                break
            time.sleep(0.02)
        else:
            raise SystemExit(f"{label}: not all {count} pods bound (and Running) within {cap} s")
        fig(f"{label}.pods", count, "pods")
        fig(f"{label}.apply_returned", t_applied, "s")
        fig(f"{label}.create_to_all_bound", t_bound, "s")
        fig(f"{label}.bound_rate", count / t_bound, "pods/s")
        if want_running:
            fig(f"{label}.create_to_all_running", t_running, "s")
            fig(f"{label}.running_rate", count / t_running, "pods/s")
        fig(f"{label}.server_cpu", cpu_seconds(self.server.pid) - cpu0, "s")
        fig(f"{label}.server_rss_after", rss_mib(self.server.pid), "MiB")
        m = metrics.scrape()
        passes = m.get("drover_scheduler_pass_duration_seconds_count", 0.0)
        total = m.get("drover_scheduler_pass_duration_seconds_sum", 0.0)
        fig(f"{label}.scheduler_passes_so_far", int(passes), "passes")
        fig(f"{label}.scheduler_pass_time_so_far", total, "s")

    def write_deployment(self, name, replicas, anti):
        path = os.path.join(self.work, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(deployment(name, replicas, anti))
        return [path]

    def run(self, pods, anti, per_file, cap, deploy=0, deploy_anti=0):
        n = self.n
        self.server, grpc, token, http = self.start_server()
        t0 = time.monotonic()
        self.sim = self.start(["sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token,
                               "--nodes", str(n)], "sim.log")
        self.wait(f"{n} nodes Ready", lambda: self.nodes_ready(True), 600)
        fig(f"n{n}.join_all_ready", time.monotonic() - t0, "s")
        metrics = Metrics(self.work, http)
        if pods:
            paths = self.write_files("bare", "bare", pods, False, per_file)
            self.wave(f"n{n}.bare", paths, pods, metrics, True, cap)
        if anti:
            paths = self.write_files("anti", "anti", anti, True, per_file)
            self.wave(f"n{n}.anti", paths, anti, metrics, False, cap)
        # One Deployment: its ReplicaSet creates the pods, the scheduler
        # binds them (the same counters).
        if deploy:
            paths = self.write_deployment("deploy", deploy, False)
            self.wave(f"n{n}.deployment", paths, deploy, metrics, True, cap)
        if deploy_anti:
            paths = self.write_deployment("deploy-anti", deploy_anti, True)
            self.wave(f"n{n}.deployment_anti", paths, deploy_anti, metrics, False, cap)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000, help="bare pods (0: skip)")
    ap.add_argument("--anti", type=int, default=1000, help="pods with hostname anti-affinity (0: skip)")
    ap.add_argument("--deployment", type=int, default=0,
                    help="then one Deployment of this many replicas (0: skip)")
    ap.add_argument("--deployment-anti", type=int, default=0,
                    help="then one Deployment of this many replicas with hostname anti-affinity (0: skip)")
    ap.add_argument("--per-file", type=int, default=500, help="pods per applied file")
    ap.add_argument("--parallel", type=int, default=4, help="applies at once")
    ap.add_argument("--cap", type=int, default=600, help="seconds a wave may take")
    ap.add_argument("--max-seconds", type=int, default=2400, help="the whole run")
    a = ap.parse_args()
    if a.anti > a.nodes or a.deployment_anti > a.nodes:
        ap.error("--anti and --deployment-anti must not exceed --nodes (one per node at most)")

    def overtime(*_):
        raise SystemExit(f"--max-seconds {a.max_seconds} reached")
    signal.signal(signal.SIGALRM, overtime)
    signal.alarm(a.max_seconds)
    print(f"# machine: {os.cpu_count()} cpus; binary {a.bin}; load {open('/proc/loadavg').read().split()[:3]}",
          file=sys.stderr, flush=True)
    work = tempfile.mkdtemp(prefix=f"drover-schedule-{a.nodes}.")
    r = Scale(a.bin, a.nodes, work)
    r.parallel = a.parallel
    try:
        r.run(a.pods, a.anti, a.per_file, a.cap, a.deployment, a.deployment_anti)
    finally:
        r.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
