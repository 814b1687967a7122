#!/usr/bin/env python3
"""drover on a real Docker engine against `docker run -d` and a Swarm global
service, in one run, on this one node (a report, not a test; issues 4 and 5).

Per variant (`default`: drover's pod sandbox / the engine's bridge network;
`host`: `hostNetwork: true` / `--network host`) and per repetition, the three
systems in turn (the order rotates every repetition, so that drift of the
machine's load spreads over all three):

  1. start:  drover `apply` of a DaemonSet (local/busybox:1, `sleep 3600`)
             | `docker service create --mode global` | `docker run -d`
             -> the workload's container is running;
  2. update: drover `apply` with an env var added to the template
             | `docker service update --env-add` | `docker rm -f` + `docker run -d`
             -> the new container is running;
  3. delete: drover `delete ds` | `docker service rm` | `docker rm -f`
             -> no container of the workload is left (sandbox included).

"Running" and "gone" are seen the same way for drover and Swarm: this script
polls the engine's API (`GET /containers/json?all=1` with a label filter,
every 20 ms, over one keep-alive connection to the socket). For `docker run`
and `docker rm -f` the figure is the CLI's own duration (it returns once the
container is started / removed). Every figure starts before the CLI process
(drover, docker) is spawned, so all three pay a CLI start. Besides, drover's
own view is timed: the first `1/1 Running` row of the new pod on a
`drover get pods -w -o wide` stream started before the run.

Then (4): with 10 DaemonSets of the `default` variant running (10 pods),
the RSS of the `drover agent` process against dockerd's and containerd's
(`VmRSS` of /proc/PID/status, after a settle time).

drover runs as one `drover server` (temp data dir, free loopback ports) and
one `drover agent --runtime docker` (node name dbench-PID); the DaemonSet has
`terminationGracePeriodSeconds: 0` because `sleep` as PID 1 ignores SIGTERM
(Swarm gets `--init` as in ../shared/anchors/swarm.sh; `docker rm -f` kills).
Swarm as swarm.sh does it: `swarm init --advertise-addr 127.0.0.1` only when
inactive (and `swarm leave --force` at the end only then), the image by ID
with `--no-resolve-image`, so nothing asks a registry. Nothing is pulled.

Prints one `name: value unit` line per figure, then a markdown table with the
ratios drover/docker-run and drover/swarm. Cleans up on exit, error, Ctrl-C
and SIGTERM: the agent leaves (SIGTERM), the server is killed, containers of
this run (label io.drover.node=NODE, the Swarm service's, dbench.floor=1) are
removed, the swarm is left if this run initialised it, temp dirs are removed.
Every wait is bounded (--timeout).

Usage: bench/docker_bench.py [--bin target/release/drover] [--reps 5]
       [--variants default,host] [--timeout 60] [--keep-logs DIR]
Env: REPS (default 5), DROVER_LOG for the agent and server (info).
"""
import argparse, http.client, json, os, shutil, signal, socket, subprocess, sys, tempfile, threading, time, urllib.parse

IMAGE = "local/busybox:1"
SVC = "dbench-g1"
API = "/v1.41"
POLL_S = 0.02


def log(*a):
    print("docker_bench:", *a, file=sys.stderr, flush=True)


def fig(name, value, unit):
    if isinstance(value, float):
        print(f"{name}: {value:.1f} {unit}", flush=True)
    else:
        print(f"{name}: {value} {unit}", flush=True)


def median(v):
    s = sorted(v)
    if not s:
        return float("nan")
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pid_of(name, parent=None):
    """Oldest process whose comm is `name` (optionally a child of `parent`)."""
    best = None
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        rest = st[st.rindex(")") + 2:].split()
        if comm != name or (parent is not None and int(rest[1]) != parent):
            continue
        start = int(rest[19])
        if best is None or start < best[0]:
            best = (start, int(d))
    return best[1] if best else None


class Engine:
    """The Docker API over its unix socket, one keep-alive connection."""

    def __init__(self, sock):
        self.sock, self.conn = sock, None

    def _connect(self):
        c = http.client.HTTPConnection("docker", timeout=10)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.sock)
        c.sock = s
        self.conn = c

    def get(self, path, **params):
        q = urllib.parse.urlencode(params)
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self._connect()
                self.conn.request("GET", API + path + ("?" + q if q else ""))
                r = self.conn.getresponse()
                body = r.read()
                if r.status >= 400:
                    raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")
                return json.loads(body) if body else None
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise

    def containers(self, *labels):
        f = json.dumps({"label": list(labels)})
        return self.get("/containers/json", all="1", filters=f)


class Watcher(threading.Thread):
    """`drover get pods -w -o wide`: the local time at which each pod name
    first showed `1/1 Running`."""

    def __init__(self, argv):
        super().__init__(daemon=True)
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.first, self.lock = {}, threading.Lock()

    def run(self):
        for line in self.p.stdout:
            c = line.split()
            if len(c) > 2 and c[0] != "NAME" and c[1] == "1/1" and c[2] == "Running":
                with self.lock:
                    self.first.setdefault(c[0], time.monotonic())

    def running_since(self, t0, exclude=()):
        with self.lock:
            ts = [t for n, t in self.first.items() if t >= t0 and n not in exclude]
        return min(ts) if ts else None

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def ds_yaml(name, host_network, rev=None):
    env = f"\n        env: [{{name: REV, value: \"{rev}\"}}]" if rev is not None else ""
    return f"""apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      hostNetwork: {"true" if host_network else "false"}
      terminationGracePeriodSeconds: 0
      containers:
      - name: c
        image: {IMAGE}
        imagePullPolicy: Never
        command: [sleep, "3600"]{env}
"""


class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.tmp = tempfile.mkdtemp(prefix="drover-dbench.")
        self.node = f"dbench-{os.getpid()}"
        self.procs = {}
        self.watcher = None
        self.we_init_swarm = False
        self.gwbridge_existed = True
        host = os.environ.get("DOCKER_HOST", "")
        if host and not host.startswith("unix://"):
            raise SystemExit("only a unix:// DOCKER_HOST is supported")
        self.engine = Engine(host[len("unix://"):] if host else "/var/run/docker.sock")
        self.res = {}  # (variant, step, system) -> [ms]

    # ---------- processes ----------
    def sh(self, *argv, timeout=None, check=True):
        r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout or self.a.timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[:300]}")
        return r.stdout

    def drover(self, *args, timeout=None, check=True):
        return self.sh(self.bin, "--config", self.cfg, *args, timeout=timeout, check=check)

    def start(self, name, argv, env=None):
        e = dict(os.environ)
        e.setdefault("DROVER_LOG", "info")
        e.update(env or {})
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.tmp, name + ".log"), "w"), env=e,
                             start_new_session=True)  # Ctrl-C reaches this script only: it stops them in order
        self.procs[name] = p
        return p

    def wait(self, what, pred, timeout=None):
        t0 = time.monotonic()
        dl = t0 + (timeout or self.a.timeout)
        while time.monotonic() < dl:
            v = pred()
            if v:
                return v
            time.sleep(POLL_S)
        raise RuntimeError(f"timed out after {timeout or self.a.timeout}s waiting for {what}")

    # ---------- engine views ----------
    def ours(self, extra=None):
        lab = [f"io.drover.node={self.node}"]
        if extra:
            lab.append(extra)
        return self.engine.containers(*lab)

    def drover_running(self, ds, exclude=()):
        """Id of a running workload container of DaemonSet `ds` not in `exclude`."""
        for c in self.ours("io.drover.role=container"):
            if c["State"] == "running" and c["Id"] not in exclude and \
                    c["Labels"].get("io.drover.pod.name", "").startswith(ds + "-"):
                return c["Id"]
        return None

    def drover_left(self, ds):
        return [c for c in self.ours() if c["Labels"].get("io.drover.pod.name", "").startswith(ds + "-")]

    def swarm_running(self, exclude=()):
        for c in self.engine.containers(f"com.docker.swarm.service.name={SVC}"):
            if c["State"] == "running" and c["Id"] not in exclude:
                return c["Id"]
        return None

    def swarm_left(self):
        return self.engine.containers(f"com.docker.swarm.service.name={SVC}")

    # ---------- setup ----------
    def setup(self):
        info = self.engine.get("/info")
        ver = self.engine.get("/version")
        fig("engine_version", ver.get("Version"), "-")
        fig("storage_driver", info.get("Driver"), "-")
        fig("cpus", os.cpu_count(), "cores")
        fig("loadavg_start", " ".join(open("/proc/loadavg").read().split()[:3]), "-")
        if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            self.sh(os.path.join(root, "deploy/examples/busybox-image.sh"), IMAGE, timeout=300)
        self.img_id = self.sh("docker", "image", "inspect", "-f", "{{.Id}}", IMAGE).strip()
        self.dockerd = pid_of("dockerd")
        self.containerd = pid_of("containerd", self.dockerd) or pid_of("containerd")
        # drover: one server, one agent with the Docker runtime
        grpc, http_ = free_port(), free_port()
        sdir = os.path.join(self.tmp, "server")
        self.cfg = os.path.join(sdir, "client.yaml")
        self.start("server", [self.bin, "server", "--data-dir", sdir, "--listen", f"127.0.0.1:{grpc}",
                              "--http", f"127.0.0.1:{http_}"])
        self.wait("the server's client.yaml", lambda: os.path.exists(self.cfg) and os.path.exists(os.path.join(sdir, "node-token")), 30)
        token = open(os.path.join(sdir, "node-token")).read().strip()
        env = {"DROVER_LOG": self.a.agent_log} if self.a.agent_log else None
        self.start("agent", [self.bin, "agent", "--server", f"127.0.0.1:{grpc}", "--token", token,
                             "--name", self.node, "--runtime", "docker",
                             "--data-dir", os.path.join(self.tmp, "agent")], env)

        def ready():
            out = self.drover("get", "nodes", self.node, "-o", "json", check=False)
            try:
                n = json.loads(out)
            except ValueError:
                return False
            return any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in n.get("status", {}).get("conditions", []))
        self.wait(f"node {self.node} Ready", ready, 30)
        self.watcher = Watcher([self.bin, "--config", self.cfg, "get", "pods", "-w", "-o", "wide"])
        self.watcher.start()
        # swarm, as swarm.sh
        if info.get("Swarm", {}).get("LocalNodeState") != "active":
            self.gwbridge_existed = subprocess.run(["docker", "network", "inspect", "docker_gwbridge"],
                                                   capture_output=True).returncode == 0
            self.sh("docker", "swarm", "init", "--advertise-addr", "127.0.0.1")
            self.we_init_swarm = True
        else:
            log("swarm already active: reusing it")
        time.sleep(2)

    # ---------- one repetition of one system ----------
    def rec(self, variant, step, system, ms):
        self.res.setdefault((variant, step, system), []).append(ms)
        t0 = time.time() - ms / 1e3  # wall clock of the step's start, to read against the agent's log
        frac = f"{t0 % 1:.3f}"[1:]
        print(f"# {variant} {system} {step}: {ms:.0f} ms (from {time.strftime('%H:%M:%S', time.gmtime(t0))}{frac}Z)",
              file=sys.stderr, flush=True)

    def rep_run(self, v, i):
        net = "host" if v == "host" else "bridge"
        run = ["docker", "run", "-d", "--label", "dbench.floor=1", "--network", net, IMAGE, "sleep", "3600"]
        t0 = time.monotonic()
        cid = self.sh(*run).strip()
        self.rec(v, "start", "run", (time.monotonic() - t0) * 1e3)
        time.sleep(self.a.settle)
        t0 = time.monotonic()
        self.sh("docker", "rm", "-f", cid)
        cid = self.sh(*run[:3], "--env", f"REV={i}", *run[3:]).strip()
        self.rec(v, "update", "run", (time.monotonic() - t0) * 1e3)
        time.sleep(self.a.settle)
        t0 = time.monotonic()
        self.sh("docker", "rm", "-f", cid)
        self.rec(v, "delete", "run", (time.monotonic() - t0) * 1e3)

    def rep_swarm(self, v, i):
        net = ["--network", "host"] if v == "host" else []
        t0 = time.monotonic()
        self.sh("docker", "service", "create", "-d", "-q", "--no-resolve-image", "--mode", "global", "--init",
                "--name", SVC, *net, "--update-parallelism", "1", self.img_id, "sleep", "3600")
        old = self.wait("swarm task container running", self.swarm_running)
        self.rec(v, "start", "swarm", (time.monotonic() - t0) * 1e3)
        time.sleep(self.a.settle)
        t0 = time.monotonic()
        self.sh("docker", "service", "update", "-d", "-q", "--no-resolve-image", "--env-add", f"REV={i}",
                "--update-parallelism", "1", SVC)
        self.wait("swarm: the new task's container running", lambda: self.swarm_running(exclude={old}))
        self.rec(v, "update", "swarm", (time.monotonic() - t0) * 1e3)
        time.sleep(self.a.settle)
        t0 = time.monotonic()
        self.sh("docker", "service", "rm", SVC)
        self.wait("swarm containers gone", lambda: not self.swarm_left())
        self.rec(v, "delete", "swarm", (time.monotonic() - t0) * 1e3)
        self.wait("swarm service gone", lambda: subprocess.run(["docker", "service", "inspect", SVC],
                                                                capture_output=True).returncode != 0, 20)

    def rep_drover(self, v, i):
        ds = f"dbench-{v}"
        path = os.path.join(self.tmp, f"{ds}.yaml")
        open(path, "w").write(ds_yaml(ds, v == "host"))
        seen = set(self.watcher.first)
        t0 = time.monotonic()
        self.drover("apply", "-f", path)
        old = self.wait("drover: container running", lambda: self.drover_running(ds))
        self.rec(v, "start", "drover", (time.monotonic() - t0) * 1e3)
        tp = self.wait("drover: pod 1/1 Running on `get pods -w`", lambda: self.watcher.running_since(t0, seen))
        self.rec(v, "start", "drover_pod_running", (tp - t0) * 1e3)
        time.sleep(self.a.settle)
        open(path, "w").write(ds_yaml(ds, v == "host", rev=i))
        seen = set(self.watcher.first)
        t0 = time.monotonic()
        self.drover("apply", "-f", path)
        self.wait("drover: the new pod's container running", lambda: self.drover_running(ds, exclude={old}))
        self.rec(v, "update", "drover", (time.monotonic() - t0) * 1e3)
        tp = self.wait("drover: new pod 1/1 Running on `get pods -w`", lambda: self.watcher.running_since(t0, seen))
        self.rec(v, "update", "drover_pod_running", (tp - t0) * 1e3)
        time.sleep(self.a.settle)
        t0 = time.monotonic()
        self.drover("delete", "ds", ds)
        self.wait("drover: containers gone", lambda: not self.drover_left(ds))
        self.rec(v, "delete", "drover", (time.monotonic() - t0) * 1e3)

        def no_pods():
            out = self.drover("get", "pods", "-o", "json", check=False)
            try:
                return not json.loads(out).get("items")
            except ValueError:
                return False
        self.wait("drover: pods gone from the API", no_pods, 30)

    # ---------- 4: RSS with 10 pods ----------
    def rss(self):
        agent, server = self.procs["agent"].pid, self.procs["server"].pid
        fig("rss_agent_before_10_pods", rss_kib(agent) / 1024.0, "MiB")
        fig("rss_dockerd_before_10_pods", rss_kib(self.dockerd) / 1024.0, "MiB")
        paths = []
        for k in range(10):
            p = os.path.join(self.tmp, f"rss-{k}.yaml")
            open(p, "w").write(ds_yaml(f"rss-{k}", False))
            paths.append(p)
        args = [x for p in paths for x in ("-f", p)]
        self.drover("apply", *args)

        def ten():
            return sum(1 for c in self.ours("io.drover.role=container") if c["State"] == "running") >= 10
        self.wait("10 drover pods' containers running", ten, 120)
        time.sleep(self.a.rss_settle)
        n = len(self.ours())
        self.r_agent = rss_kib(agent) / 1024.0
        self.r_dockerd = rss_kib(self.dockerd) / 1024.0
        fig("drover_containers_running_for_10_pods", n, "containers")
        fig("rss_agent_10_pods", self.r_agent, "MiB")
        fig("rss_server_10_pods", rss_kib(server) / 1024.0, "MiB")
        fig("rss_dockerd_10_pods", self.r_dockerd, "MiB")
        fig("rss_containerd_10_pods", rss_kib(self.containerd) / 1024.0 if self.containerd else float("nan"), "MiB")
        self.drover("delete", *args)
        self.wait("the 10 pods' containers gone", lambda: not self.ours(), 120)

    # ---------- report ----------
    def report(self):
        steps = [("start", "apply/create/run → container running"),
                 ("update", "template change → new container running"),
                 ("delete", "delete → container gone")]
        rows = []
        for v in self.a.variants:
            for step, label in steps:
                m = {s: median(self.res.get((v, step, s), [])) for s in ("drover", "drover_pod_running", "run", "swarm")}
                for s, val in m.items():
                    fig(f"{v}.{step}.{s}", val, "ms")
                rows.append((v, label, m))
        print()
        print(f"| variant | step | drover | drover pod Running (API) | docker run | Swarm global | drover/run | drover/swarm |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for v, label, m in rows:
            dp = f"{m['drover_pod_running']:.0f} ms" if m["drover_pod_running"] == m["drover_pod_running"] else "–"
            print(f"| {v} | {label} | {m['drover']:.0f} ms | {dp} | {m['run']:.0f} ms | {m['swarm']:.0f} ms "
                  f"| {m['drover'] / m['run']:.2f}× | {m['drover'] / m['swarm']:.2f}× |")
        if hasattr(self, "r_agent"):
            print(f"| – | RSS with 10 pods running | agent {self.r_agent:.1f} MiB | | dockerd {self.r_dockerd:.1f} MiB | | "
                  f"agent/dockerd {self.r_agent / self.r_dockerd:.2f}× | |")
        print(flush=True)

    # ---------- cleanup ----------
    def cleanup(self):
        if self.watcher:
            self.watcher.stop()
        subprocess.run(["docker", "service", "rm", SVC], capture_output=True, timeout=30)
        agent = self.procs.get("agent")
        if agent and agent.poll() is None:
            agent.send_signal(signal.SIGTERM)  # leaves: the server deletes the node, the agent stops its pods
            try:
                agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        for lab in (f"io.drover.node={self.node}", "dbench.floor=1", f"com.docker.swarm.service.name={SVC}"):
            ids = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={lab}"], capture_output=True,
                                 text=True, timeout=30).stdout.split()
            if ids:
                subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=60)
        if self.we_init_swarm:
            subprocess.run(["docker", "swarm", "leave", "--force"], capture_output=True, timeout=60)
            if not self.gwbridge_existed:
                subprocess.run(["docker", "network", "rm", "docker_gwbridge"], capture_output=True, timeout=30)
            self.we_init_swarm = False
        if self.a.keep_logs:
            os.makedirs(self.a.keep_logs, exist_ok=True)
            for f in ("server.log", "agent.log"):
                if os.path.exists(os.path.join(self.tmp, f)):
                    shutil.copy(os.path.join(self.tmp, f), self.a.keep_logs)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self):
        self.setup()
        systems = [("run", self.rep_run), ("drover", self.rep_drover), ("swarm", self.rep_swarm)]
        for v in self.a.variants:
            for i in range(1, self.a.reps + 1):
                k = (i - 1) % 3
                for name, f in systems[k:] + systems[:k]:
                    f(v, i)
                    time.sleep(self.a.settle)
        fig("rss_dockerd_swarm_active", rss_kib(self.dockerd) / 1024.0, "MiB")
        if self.we_init_swarm:  # the RSS comparison without swarm's state in dockerd
            subprocess.run(["docker", "swarm", "leave", "--force"], capture_output=True, timeout=60)
            if not self.gwbridge_existed:
                subprocess.run(["docker", "network", "rm", "docker_gwbridge"], capture_output=True, timeout=30)
            self.we_init_swarm = False
            time.sleep(2)
        self.rss()
        fig("reps", self.a.reps, "runs")
        fig("loadavg_end", " ".join(open("/proc/loadavg").read().split()[:3]), "-")
        self.report()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("REPS", "5")))
    ap.add_argument("--variants", default="default,host", help="default,host (or one of them)")
    ap.add_argument("--timeout", type=float, default=60.0, help="bound of every wait, seconds")
    ap.add_argument("--settle", type=float, default=0.5, help="pause between steps, seconds")
    ap.add_argument("--rss-settle", type=float, default=5.0, help="wait before reading RSS, seconds")
    ap.add_argument("--agent-log", default=None, help="DROVER_LOG of the agent (e.g. debug)")
    ap.add_argument("--keep-logs", default=None, help="copy server.log and agent.log to this dir")
    a = ap.parse_args()
    a.variants = [v for v in a.variants.split(",") if v]
    if any(v not in ("default", "host") for v in a.variants):
        raise SystemExit("--variants: default and/or host")
    b = Bench(a)
    try:
        b.run()
    finally:
        b.cleanup()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Also when started in the background (where SIGINT may be inherited ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
