#!/usr/bin/env python3
"""drover at scale with simulated nodes (a report, not a test).

For each N in --nodes: starts one `drover server` (fresh data dir, ephemeral
ports) and one `drover sim --nodes N`, then measures
  - join: sim start -> N nodes Ready
  - apply: `drover apply` of a DaemonSet -> N pods created, and -> N pods
    Ready, as the DaemonSet's status says on a `get ds -w` stream (the pods
    themselves are then checked once)
  - join latency: a second sim adds --join-nodes nodes; for each, the time
    from its Node first showing Ready to its pod first showing Running 1/1,
    both seen on `drover get ... -w` streams timestamped here (p50/p99)
  - sigkill: SIGKILL of the sim process -> N nodes NotReady (node timeout
    5 s), seen on a `get nodes -w` stream
  - CPU time of the server and of the sim from the sim's start to all Ready
  - RSS of the server (after the join and after apply) and of the sim
    process (per node)
  - the Kubernetes API against the same cluster, side by side with
    drover's own CLI (--kubectl): `kubectl get pods -A` and `drover get
    pods -A` (wall time, median of 3), the raw list of every pod
    (`kubectl get --raw /api/v1/pods`: what the server takes to serve it),
    the first screen of `kubectl get ds -w` and `drover get ds -w`, and
    the server's RSS after them
Every port is TLS 1.3: each simulated node makes its own key, gets its
certificate (Cluster.Certify, with the node token read from the server's
DATA_DIR/node-token by `drover sim --token-file`) and keeps its own TLS
connection; the drover commands read DATA_DIR/client.yaml (servers, CA,
admin token).
and prints one `name: value unit` line per figure. Every process it starts
is killed on exit; every wait has a deadline.

Usage: bench/sim_scale.py [--bin target/release/drover] [--nodes 1000,10000] [--kubectl]
"""
import argparse, json, os, shutil, signal, socket, subprocess, sys, tempfile, threading, time

DS = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: scale}
spec:
  selector: {matchLabels: {app: scale}}
  template:
    metadata: {labels: {app: scale}}
    spec:
      containers: [{name: c, image: local/busybox:1}]
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def cpu_s(pid):
    """User + system CPU time of a process, in seconds (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def fig(name, value, unit):
    print(f"{name}: {value:.1f} {unit}" if isinstance(value, float) else f"{name}: {value} {unit}", flush=True)


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, -(-p * len(sorted_vals) // 100) - 1))
    return sorted_vals[k]


class Watcher(threading.Thread):
    """Reads `drover get KIND -w -o wide` and keeps the local time at which
    each name first matched `pred(columns)`."""

    def __init__(self, argv, pred):
        super().__init__(daemon=True)
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.pred, self.first = pred, {}

    def run(self):
        for line in self.p.stdout:
            cols = line.split()
            if cols and cols[0] != "NAME" and cols[0] not in self.first and self.pred(cols):
                self.first[cols[0]] = (time.monotonic(), cols)

    def stop(self):
        self.p.kill()
        self.p.wait()


class Run:
    def __init__(self, binary, n, work, join_nodes=0, kubectl=False):
        self.bin, self.n, self.work, self.procs = binary, n, work, []
        self.join_nodes = join_nodes
        self.kubectl = kubectl
        self.cfg = os.path.join(work, "server", "client.yaml")

    def start(self, args, log):
        p = subprocess.Popen([self.bin] + args, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.work, log), "w"))
        self.procs.append(p)
        return p

    def drover_json(self, *args):
        out = subprocess.run([self.bin, "--config", self.cfg] + list(args) + ["-o", "json"],
                             capture_output=True, timeout=120)
        if out.returncode != 0:
            return []
        return json.loads(out.stdout).get("items", [])

    def wait(self, what, pred, timeout):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if pred():
                return time.monotonic() - t0
            time.sleep(0.05)
        raise SystemExit(f"timed out after {timeout}s waiting for {what}")

    def nodes_ready(self, want_ready):
        items = self.drover_json("get", "nodes")
        def ready(n):
            return any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in n.get("status", {}).get("conditions", []))
        count = sum(1 for n in items if ready(n) == want_ready)
        return count == self.n

    def pods_ready(self):
        items = self.drover_json("get", "pods", "-A")
        ok = sum(1 for p in items if p.get("status", {}).get("phase") == "Running" and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in p.get("status", {}).get("conditions", [])))
        return ok == self.n

    def start_server(self):
        """One `drover server` (node timeout 5 s) on free loopback ports:
        (process, gRPC port, path of its node token), once its client config
        and node token exist."""
        grpc, http = free_port(), free_port()
        self.http = http  # /metrics (bench/rollout_scale.py reads the controller's passes)
        server = self.start(["server", "--data-dir", os.path.join(self.work, "server"),
                             "--listen", f"127.0.0.1:{grpc}", "--http", f"127.0.0.1:{http}",
                             "--node-timeout", "5s",
                             # One connection per simulated node, all from
                             # 127.0.0.1: above the default cap of one address.
                             "--max-connections-per-address", str(self.n + 1000)],
                            "server.log")
        token = os.path.join(self.work, "server", "node-token")
        self.wait("client.yaml and node-token",
                  lambda: os.path.exists(self.cfg) and os.path.exists(token), 30)
        return server, grpc, token

    def run(self):
        n, prefix = self.n, f"n{self.n}."
        server, grpc, token = self.start_server()
        # Followed on a `get nodes -w` stream (NAME STATUS ...), not by
        # listing every node every 50 ms: at 10,000 nodes those lists (and
        # their JSON, parsed here) cost more CPU than the join itself.
        joined = Watcher([self.bin, "--config", self.cfg, "get", "nodes", "-w"],
                         lambda c: len(c) > 1 and c[1] == "Ready")
        joined.start()
        time.sleep(1.0)  # the watch is established
        server_cpu0 = cpu_s(server.pid)
        t0 = time.monotonic()
        sim = self.start(["sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token,
                          "--nodes", str(n)], "sim.log")
        self.wait(f"{n} nodes Ready", lambda: len(joined.first) >= n, 600)
        fig(prefix + "join_all_ready", (max(t for t, _ in joined.first.values()) - t0) * 1e3, "ms")
        # CPU spent from the sim's start to all Ready (the server's includes
        # serving the watch above).
        fig(prefix + "join_server_cpu", cpu_s(server.pid) - server_cpu0, "s")
        fig(prefix + "join_sim_cpu", cpu_s(sim.pid), "s")
        joined.stop()
        # Checked once on the nodes themselves.
        if not self.nodes_ready(True):
            raise SystemExit("the watch showed every node Ready but a list does not")
        fig(prefix + "server_rss_after_join", rss_mib(server.pid), "MiB")
        sim_rss = rss_mib(sim.pid)
        fig(prefix + "sim_rss_after_join", sim_rss, "MiB")
        fig(prefix + "sim_rss_per_node_after_join", sim_rss * 1024 / n, "KiB")
        path = os.path.join(self.work, "ds.yaml")
        open(path, "w").write(DS)
        # Followed on a watch of the DaemonSet (what `rollout status` reads):
        # NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE ...
        base = [self.bin, "--config", self.cfg, "get", "ds", "-w"]
        created = Watcher(base, lambda c: len(c) > 3 and c[2] == str(n))
        ready = Watcher(base, lambda c: len(c) > 3 and c[3] == str(n))
        created.start()
        ready.start()
        time.sleep(1.0)  # both watches are established
        t0 = time.monotonic()
        subprocess.run([self.bin, "--config", self.cfg, "apply", "-f", path], check=True,
                       capture_output=True, timeout=60)
        self.wait(f"{n} pods Ready (DaemonSet status)", lambda: "scale" in ready.first, 600)
        fig(prefix + "apply_to_all_pods_created", (created.first["scale"][0] - t0) * 1e3, "ms")
        fig(prefix + "apply_to_all_pods_ready", (ready.first["scale"][0] - t0) * 1e3, "ms")
        created.stop()
        ready.stop()
        # Checked once on the pods themselves.
        if not self.pods_ready():
            raise SystemExit("the DaemonSet counts its pods Ready but the pods are not all Running and Ready")
        fig(prefix + "server_rss", rss_mib(server.pid), "MiB")
        sim_rss = rss_mib(sim.pid)
        fig(prefix + "sim_rss", sim_rss, "MiB")
        fig(prefix + "sim_rss_per_node", sim_rss * 1024 / n, "KiB")
        if self.kubectl:
            self.api_figures(prefix, server)
        if self.join_nodes:
            self.join_latency(grpc, token, prefix)
        # NAME STATUS ROLES AGE VERSION
        gone = Watcher([self.bin, "--config", self.cfg, "get", "nodes", "-w"],
                       lambda c: len(c) > 1 and c[1].startswith("NotReady"))
        gone.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        sim.kill()
        sim.wait()
        def all_gone():
            return sum(1 for k in list(gone.first) if not k.startswith("join-")) >= n
        self.wait(f"{n} nodes NotReady", all_gone, 120)
        last = max(t for k, (t, _) in list(gone.first.items()) if not k.startswith("join-"))
        fig(prefix + "sigkill_to_all_not_ready", (last - t0) * 1e3, "ms")
        gone.stop()
        fig(prefix + "pods_kept_after_sigkill", len(self.drover_json("get", "pods", "-A")), "pods")

    def timed(self, argv, runs=3):
        """Median wall time of `argv` over `runs` runs (ms), and its last
        output."""
        times, out = [], b""
        for _ in range(runs):
            t0 = time.monotonic()
            r = subprocess.run(argv, capture_output=True, timeout=120)
            times.append((time.monotonic() - t0) * 1e3)
            if r.returncode != 0:
                raise SystemExit(f"{' '.join(argv)}: {r.stderr.decode()[:400]}")
            out = r.stdout
        return sorted(times)[len(times) // 2], out

    def first_screen(self, argv, timeout=60):
        """Time (ms) from starting a `-w` command to its first row."""
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            header = p.stdout.readline()
            row = p.stdout.readline()
            if not header or not row:
                raise SystemExit(f"{' '.join(argv)} printed nothing")
            return (time.monotonic() - t0) * 1e3
        finally:
            p.kill()
            p.wait()

    def api_figures(self, prefix, server):
        kubeconfig = os.path.join(self.work, "server", "kubeconfig")
        kubectl = ["kubectl", "--kubeconfig", kubeconfig]
        drover = [self.bin, "--config", self.cfg]
        t, out = self.timed(kubectl + ["get", "pods", "-A"])
        rows = len(out.splitlines()) - 1
        if rows != self.n:
            raise SystemExit(f"kubectl get pods -A listed {rows} pods, not {self.n}")
        fig(prefix + "kubectl_get_pods_all_namespaces", t, "ms")
        t, _ = self.timed(drover + ["get", "pods", "-A"])
        fig(prefix + "drover_get_pods_all_namespaces", t, "ms")
        t, out = self.timed(kubectl + ["get", "--raw", "/api/v1/pods"])
        items = len(json.loads(out)["items"])
        if items != self.n:
            raise SystemExit(f"/api/v1/pods listed {items} pods, not {self.n}")
        fig(prefix + "api_list_all_pods", t, "ms")
        fig(prefix + "kubectl_get_ds_watch_first_screen", self.first_screen(kubectl + ["get", "ds", "-w"]), "ms")
        fig(prefix + "drover_get_ds_watch_first_screen", self.first_screen(drover + ["get", "ds", "-w"]), "ms")
        fig(prefix + "server_rss_after_api", rss_mib(server.pid), "MiB")

    def join_latency(self, grpc, token, prefix):
        m = self.join_nodes
        base = [self.bin, "--config", self.cfg, "get"]
        nodes = Watcher(base + ["nodes", "-w"], lambda c: len(c) > 1 and c[1] == "Ready")
        # NAME READY STATUS RESTARTS AGE IP NODE
        pods = Watcher(base + ["pods", "-w", "-o", "wide"],
                       lambda c: len(c) > 6 and c[1] == "1/1" and c[2] == "Running")
        nodes.start()
        pods.start()
        time.sleep(1.0)  # both watches are established and have printed their tables
        joiner = self.start(["sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token,
                             "--nodes", str(m), "--prefix", "join-"], "join-sim.log")
        def done():
            on = {c[6] for (_, c) in list(pods.first.values()) if c[6].startswith("join-")}
            return len(on) == m
        self.wait(f"{m} joining nodes with a Running pod", done, 120)
        ready_at = {name: t for name, (t, _) in nodes.first.items() if name.startswith("join-")}
        lat = sorted((t - ready_at[c[6]]) * 1e3 for (t, c) in pods.first.values()
                     if c[6] in ready_at)
        fig(prefix + "join_to_pod_running_p50", pct(lat, 50), "ms")
        fig(prefix + "join_to_pod_running_p99", pct(lat, 99), "ms")
        fig(prefix + "join_to_pod_running_samples", len(lat), "nodes")
        joiner.send_signal(signal.SIGTERM)
        joiner.wait(timeout=60)
        nodes.stop()
        pods.stop()

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--nodes", default="1000,10000")
    ap.add_argument("--join-nodes", type=int, default=100,
                    help="nodes that join after the DaemonSet is everywhere (0: skip)")
    ap.add_argument("--kubectl", action="store_true",
                    help="also time kubectl against the Kubernetes API, beside drover's CLI")
    a = ap.parse_args()
    print(f"# machine: {os.cpu_count()} cpus; load {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr)
    for n in [int(x) for x in a.nodes.split(",")]:
        work = tempfile.mkdtemp(prefix=f"drover-scale-{n}.")
        r = Run(a.bin, n, work, a.join_nodes, a.kubectl)
        try:
            r.run()
        finally:
            r.close()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
