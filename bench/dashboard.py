#!/usr/bin/env python3
"""The dashboard at scale, in a real browser (a report, not a test).

For each N in --nodes: one `drover server` process (fresh data dir,
ephemeral loopback ports, node timeout 5 s), two `drover sim` processes
(N - --dies nodes `stays-*`, and --dies nodes `dies-*`, killed later), a
DaemonSet `agent` on every node; then Debian's headless Chromium (through
chromedriver, driven by PyPI's selenium) signs in with the admin token of
DATA_DIR/client.yaml and measures
  - first paint: the browser's `first-contentful-paint` and the navigation
    timing (response end, DOMContentLoaded) of the overview, the node list
    and the DaemonSet's page (median of --reps loads each)
  - the server's RSS before any dashboard page, and with the DaemonSet's
    page open and its live stream fed for 3 s (the extra is the dashboard's)
  - rollout step -> cell: the DaemonSet's template changes; for each node,
    from its new pod first showing Running and Ready on the Kubernetes
    API's pod watch (read here as JSON lines) to its grid cell turning
    `updated` in the browser (a
    MutationObserver stamps each change with Date.now())
  - NotReady -> red: SIGKILL of the `dies-*` sim; for each of its nodes,
    from NotReady on a `drover get nodes -w` stream to its status pill on
    the node list turning red in the browser
Both ends of a latency are the same machine's wall clock (Date.now() in
the page, time.time() here), so the figure is the store's watch -> the
member's informer -> the page's server-sent event -> the DOM, less the
time the reference watch (the API's JSON watch for pods, the CLI's table
for nodes) took to show the change here.

Prints one `name: value unit` line per figure, then a table. Every process
it starts is killed on exit; every wait has a deadline.

Usage: bench/dashboard.py [--bin target/release/drover] [--nodes 1000,10000]
                          [--dies 10] [--reps 3]
"""
import argparse, os, shutil, signal, statistics, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_scale import free_port, pct, rss_mib  # noqa: E402

DS = """apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{maxUnavailable: "{unavailable}"}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      containers: [{{name: agent, image: "local/busybox:1", env: [{{name: VERSION, value: "{version}"}}]}}]
"""

# Stamps, in the page, the wall time of each element's class change:
# window.__seen[id] = [Date.now(), class] the first time `want` is in it.
OBSERVE = """
const sel = arguments[0], want = arguments[1];
window.__seen = {};
const obs = new MutationObserver(ms => {
  const now = Date.now();
  for (const m of ms) {
    const el = m.target;
    const holder = el.closest('[id]');
    const id = holder ? holder.id : el.id;
    if (!(id in window.__seen) && el.className.split(' ').includes(want)) {
      window.__seen[id] = now;
    }
  }
});
document.querySelectorAll(sel).forEach(el =>
  obs.observe(el, {attributes: true, attributeOldValue: true, attributeFilter: ['class'], subtree: true}));
return document.querySelectorAll(sel).length;
"""


def rss_settled(pid):
    """The median of 5 readings of RSS, 0.2 s apart."""
    vals = []
    for _ in range(5):
        vals.append(rss_mib(pid))
        time.sleep(0.2)
    return statistics.median(vals)


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def fig(name, value, unit):
    v = f"{value:.1f}" if isinstance(value, float) else str(value)
    print(f"{name}: {v} {unit} (load {loadavg()})", flush=True)


class Watcher(threading.Thread):
    """Reads `drover get KIND -w ...` and keeps the wall time (time.time())
    at which each name first matched `pred(columns)`."""

    def __init__(self, argv, pred):
        super().__init__(daemon=True)
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.pred, self.first = pred, {}

    def run(self):
        for line in self.p.stdout:
            cols = line.split()
            if cols and cols[0] != "NAME" and cols[0] not in self.first and self.pred(cols):
                self.first[cols[0]] = (time.time(), cols)

    def stop(self):
        self.p.kill()
        self.p.wait()


class PodWatch(threading.Thread):
    """Follows the pods of `default` on the Kubernetes API's watch (HTTPS,
    the admin token), one JSON event per line, parsed here: the reference
    clock for "Ready in the store". Lighter than a `drover get pods -w`
    table (which at 10,000 pods printed rows later than the page changed);
    keeps the wall time at which each pod not in `before` was first seen
    Running and Ready, with its node."""

    def __init__(self, base, token, ca, before):
        super().__init__(daemon=True)
        self.base, self.token, self.ca, self.before = base, token, ca, before
        self.first, self.listed, self.done = {}, 0, False

    def run(self):
        import http.client, json, ssl, urllib.parse
        # This thread is the reference clock: on a loaded machine it must
        # not wait for the CPU behind the browser and the sims (the nice
        # value is per thread on Linux; lowering it needs root, else it
        # stays as it is).
        try:
            os.nice(-10)
        except OSError:
            pass
        u = urllib.parse.urlparse(self.base)
        conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=900,
                                           context=ssl.create_default_context(cafile=self.ca))
        conn.request("GET", "/api/v1/namespaces/default/pods?watch=1",
                     headers={"Authorization": f"Bearer {self.token}"})
        resp = conn.getresponse()
        while not self.done:
            line = resp.readline()
            if not line:
                return
            ev = json.loads(line)
            pod = ev.get("object", {})
            name = pod.get("metadata", {}).get("name", "")
            if name in self.before:
                self.listed += 1
                continue
            st = pod.get("status", {})
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in st.get("conditions", []))
            if name not in self.first and st.get("phase") == "Running" and ready:
                self.first[name] = (time.time(), pod.get("spec", {}).get("nodeName", ""))

    def stop(self):
        self.done = True


def wait(what, pred, timeout, every=0.05):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout}s waiting for {what}")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
              "--disable-gpu", "--window-size=1280,900"):
        o.add_argument(a)
    o.accept_insecure_certs = True  # the cluster's own CA
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    d.set_script_timeout(60)
    d.set_page_load_timeout(120)
    return d


class Run:
    def __init__(self, binary, n, dies, reps, work):
        self.bin, self.n, self.dies, self.reps, self.work = binary, n, min(dies, n // 2), reps, work
        self.procs, self.figs = [], {}
        self.cfg = os.path.join(work, "server", "client.yaml")

    def fig(self, name, value, unit):
        self.figs[name] = (value, unit, loadavg())
        fig(f"n{self.n}.{name}", value, unit)

    def start(self, args, log):
        p = subprocess.Popen([self.bin] + args, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.work, log), "w"))
        self.procs.append(p)
        return p

    def cli(self, *args):
        return [self.bin, "--config", self.cfg] + list(args)

    def apply(self, version):
        path = os.path.join(self.work, f"ds-{version}.yaml")
        open(path, "w").write(DS.format(version=version, unavailable="10%"))
        subprocess.run(self.cli("apply", "-f", path), check=True, capture_output=True, timeout=60)

    def run(self):
        n = self.n
        grpc, http = free_port(), free_port()
        server = self.start(["server", "--data-dir", os.path.join(self.work, "server"),
                             "--listen", f"127.0.0.1:{grpc}", "--http", f"127.0.0.1:{http}",
                             "--node-timeout", "5s",
                             "--max-connections-per-address", str(n + 1000)], "server.log")
        token = os.path.join(self.work, "server", "node-token")
        wait("client.yaml and node-token", lambda: os.path.exists(self.cfg) and os.path.exists(token), 60)
        self.url = f"https://127.0.0.1:{http}"
        ready = Watcher(self.cli("get", "nodes", "-w"), lambda c: len(c) > 1 and c[1] == "Ready")
        ready.start()
        t0 = time.monotonic()
        sim_args = ["sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token]
        self.start(sim_args + ["--nodes", str(n - self.dies), "--prefix", "stays-"], "sim-stays.log")
        dies = self.start(sim_args + ["--nodes", str(self.dies), "--prefix", "dies-"], "sim-dies.log")
        wait(f"{n} nodes Ready", lambda: len(ready.first) >= n, 900, 0.2)
        ready.stop()
        self.fig("join_all_ready", time.monotonic() - t0, "s")
        # NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE ...
        done = lambda: Watcher(self.cli("get", "ds", "-w"),
                               lambda c: len(c) > 5 and c[4] == str(n) and c[5] == str(n))
        ds = done()
        ds.start()
        self.apply("1")
        wait(f"the DaemonSet available on {n} nodes", lambda: "agent" in ds.first, 900, 0.2)
        ds.stop()
        time.sleep(2.0)  # the server settles after the rollout
        rss0 = rss_settled(server.pid)
        self.fig("server_rss_before_dashboard", rss0, "MiB")
        d = browser()
        try:
            self.sign_in(d)
            for name, path in (("overview", "/ui"), ("nodes", "/ui/nodes"),
                               ("daemonset", "/ui/daemonsets/default/agent")):
                self.paint(d, name, path)
            self.open_live(d, "/ui/daemonsets/default/agent", f"{n} grid cells",
                           lambda: d.execute_script("return document.querySelectorAll('#grid .c').length") == n)
            time.sleep(3.0)  # the live stream is fed while the page is open
            rss1 = rss_settled(server.pid)
            self.fig("server_rss_dashboard_open", rss1, "MiB")
            self.fig("server_rss_extra", rss1 - rss0, "MiB")
            self.rollout(d)
            self.red(d, dies)
        finally:
            d.quit()

    def token(self):
        """The admin token of DATA_DIR/client.yaml."""
        return next(l.split(":", 1)[1].strip().strip('"') for l in open(self.cfg)
                    if l.strip().startswith("token:"))

    def sign_in(self, d):
        from selenium.webdriver.common.by import By
        token = self.token()
        d.get(self.url + "/ui/login")
        d.find_element(By.ID, "token").send_keys(token)
        d.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait("the overview after sign-in", lambda: d.current_url.rstrip("/").endswith("/ui"), 60)

    def paint(self, d, name, path):
        fcps, loaded, dom = [], [], []
        for _ in range(self.reps):
            d.get(self.url + path)
            fcp = wait(f"the first paint of {path}", lambda: d.execute_script("""
                const p = performance.getEntriesByName('first-contentful-paint')[0];
                return p ? p.startTime : null;"""), 60)
            nav = d.execute_script("""
                const n = performance.getEntriesByType('navigation')[0];
                return [n.responseEnd - n.startTime, n.domContentLoadedEventEnd - n.startTime];""")
            fcps.append(fcp)
            loaded.append(nav[0])
            dom.append(nav[1])
        self.fig(f"{name}_first_paint", statistics.median(fcps), "ms")
        self.fig(f"{name}_response_end", statistics.median(loaded), "ms")
        self.fig(f"{name}_dom_ready", statistics.median(dom), "ms")

    def open_live(self, d, path, what, cond):
        d.get(self.url + path)
        wait(what, cond, 120, 0.1)
        wait("the live stream", lambda: "on" in d.find_element("id", "live-state").get_attribute("class"), 60)

    def rollout(self, d):
        """Each node's new pod Running 1/1 on a pod watch -> its cell
        `s-updated` in the page."""
        n = self.n
        before = set()
        listed = subprocess.run(self.cli("get", "pods"), capture_output=True,
                                text=True, timeout=120).stdout
        for line in listed.splitlines():
            cols = line.split()
            if cols and cols[0] != "NAME":
                before.add(cols[0])
        pods = PodWatch(self.url, self.token(), os.path.join(self.work, "server", "ca.crt"), before)
        pods.start()
        # The watch has listed the pods there are (their ADDED events).
        wait("the pod watch's first list", lambda: pods.listed >= len(before), 120)
        # Each cell's first change to updated from now on.
        d.execute_script(OBSERVE, "#grid", "s-updated")
        t0 = time.time()
        self.apply("2")
        wait(f"{n} cells updated", lambda: len(d.execute_script("return Object.keys(window.__seen)")) >= n,
             900, 0.5)
        seen = d.execute_script("return window.__seen")
        pods.stop()
        lat = []
        for name, (at, node) in pods.first.items():
            shown = seen.get(f"g:{node}")
            if shown is not None:
                lat.append(shown / 1e3 - at)
        self.fig("rollout_cells_updated", len(seen), "cells")
        self.fig("rollout_apply_to_all_cells_updated", max(seen.values()) / 1e3 - t0, "s")
        self.fig("rollout_pod_ready_to_cell_p50", pct(sorted(lat), 50) * 1e3, "ms")
        self.fig("rollout_pod_ready_to_cell_p99", pct(sorted(lat), 99) * 1e3, "ms")
        self.fig("rollout_pod_ready_to_cell_max", max(lat) * 1e3 if lat else float("nan"), "ms")

    def red(self, d, dies):
        """SIGKILL of the `dies-*` sim: each node NotReady on a node watch ->
        its pill red on the node list."""
        self.open_live(d, "/ui/nodes?q=dies-", "the dies-* nodes listed",
                       lambda: len(d.execute_script("return document.querySelectorAll('tr[id^=\"n:dies-\"]')")) == self.dies)
        count = d.execute_script(OBSERVE, "tr[id^='n:dies-']", "bad")
        if count != self.dies:
            raise SystemExit(f"{count} dies-* rows observed, not {self.dies}")
        gone = Watcher(self.cli("get", "nodes", "-w"),
                       lambda c: c[0].startswith("dies-") and len(c) > 1 and c[1].startswith("NotReady"))
        gone.start()
        time.sleep(1.0)
        t0 = time.time()
        dies.kill()
        dies.wait()
        wait(f"{self.dies} pills red", lambda: len(d.execute_script("return Object.keys(window.__seen)")) >= self.dies,
             120, 0.1)
        seen = d.execute_script("return window.__seen")
        wait("the watch's NotReady lines", lambda: len(gone.first) >= self.dies, 30)
        gone.stop()
        lat = [seen[f"n:{name}"] / 1e3 - at for name, (at, _) in gone.first.items() if f"n:{name}" in seen]
        self.fig("sigkill_to_all_red", max(seen.values()) / 1e3 - t0, "s")
        self.fig("not_ready_to_red_p50", pct(sorted(lat), 50) * 1e3, "ms")
        self.fig("not_ready_to_red_max", max(lat) * 1e3, "ms")

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()


ROWS = [
    ("join_all_ready", "sim nodes Ready after the sims' start"),
    ("overview_first_paint", "overview, first contentful paint"),
    ("nodes_first_paint", "node list, first contentful paint"),
    ("daemonset_first_paint", "DaemonSet page, first contentful paint"),
    ("overview_response_end", "overview, response end"),
    ("nodes_response_end", "node list, response end"),
    ("daemonset_response_end", "DaemonSet page, response end"),
    ("daemonset_dom_ready", "DaemonSet page, DOMContentLoaded"),
    ("rollout_pod_ready_to_cell_p50", "new pod Ready in the store -> cell updated, p50"),
    ("rollout_pod_ready_to_cell_p99", "new pod Ready in the store -> cell updated, p99"),
    ("rollout_pod_ready_to_cell_max", "new pod Ready in the store -> cell updated, max"),
    ("rollout_apply_to_all_cells_updated", "apply -> every cell updated"),
    ("not_ready_to_red_p50", "node NotReady in the store -> red, p50"),
    ("not_ready_to_red_max", "node NotReady in the store -> red, max"),
    ("server_rss_before_dashboard", "server RSS, no dashboard"),
    ("server_rss_dashboard_open", "server RSS, DaemonSet page open"),
    ("server_rss_extra", "server RSS, extra"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--nodes", default="1000,10000")
    ap.add_argument("--dies", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    # `timeout` (as .ci/bench-smoke runs it) sends SIGTERM: leave through
    # the `finally` below so the server and sims it started are killed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = [int(x) for x in a.nodes.split(",")]
    results = {}
    for n in sizes:
        work = tempfile.mkdtemp(prefix=f"drover-dash-{n}-")
        r = Run(os.path.abspath(a.bin), n, a.dies, a.reps, work)
        try:
            r.run()
        finally:
            r.close()
            results[n] = r.figs
            shutil.rmtree(work, ignore_errors=True)
    print()
    print("| figure | " + " | ".join(f"{n:,} sim nodes" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for key, label in ROWS:
        cells = []
        for n in sizes:
            v = results[n].get(key)
            cells.append("—" if v is None else f"{v[0]:.1f} {v[1]} (load {v[2]})")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
