#!/usr/bin/env python3
"""Snapshots of a cluster's store, drover beside etcd (a report, not a test).

For N in --nodes: one `drover server` and `drover sim --nodes N` with one
DaemonSet (N nodes, N pods, their events and revisions: N nodes' worth of
objects), then
  - save: `drover cluster snapshot save FILE` wall time (median of --reps)
    with the N nodes connected (live), the file's size and object count
  - restore: `drover server --restore FILE` in an empty data dir, from the
    process's start to its first acknowledged write (`drover kv put`)
  - save again from the restored server: the same store with no node
    connected (idle), as etcd's below; the ratio uses this one
and, side by side, one etcd 3.4 member (Debian's etcd-server, the same
machine) loaded with the same keys and values (read back from drover's
snapshot file, put through etcd's JSON gateway by 16 threads):
  - save: `etcdctl snapshot save FILE` (median of --reps), the file's size
  - restore: `etcdctl snapshot restore` into an empty data dir, then etcd
    started on it, to its first acknowledged put
with each drover/etcd ratio. Without etcd (`etcd`, `etcdctl` on PATH) that
side is skipped out loud. Prints one `name: value unit` line per figure;
every process it starts is killed on exit; every wait has a deadline.

Usage: bench/snapshot_bench.py [--bin target/release/drover] [--nodes 10000] [--reps 3]
"""
import argparse, base64, http.client, json, os, shutil, signal, socket, statistics
import struct, subprocess, sys, tempfile, threading, time

DS = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: snap}
spec:
  selector: {matchLabels: {app: snap}}
  template:
    metadata: {labels: {app: snap}}
    spec:
      containers: [{name: c, image: local/busybox:1}]
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fig(name, value, unit):
    if isinstance(value, float):
        value = f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"
    print(f"{name}: {value} {unit}", flush=True)


def log(msg):
    print(f"# {msg}", file=sys.stderr, flush=True)


def wait(what, cond, timeout, every=0.1):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def varint(b, i):
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        if c < 0x80:
            return value, i
        shift += 7


def records(path):
    """(key, value) of every object of a drover snapshot file
    (crates/drover-store/src/backup.rs: magic, header, records)."""
    b = open(path, "rb").read()
    assert b[:16] == b"drover-snapshot\n", "not a drover snapshot"
    (hlen,) = struct.unpack(">I", b[16:20])
    i = 20 + hlen
    out = []
    while True:
        (n,) = struct.unpack(">I", b[i:i + 4])
        i += 4
        if n == 0:
            return out
        rec, i = b[i:i + n], i + n
        j, key, value = 0, b"", b""
        while j < len(rec):
            tag, j = varint(rec, j)
            field, wire = tag >> 3, tag & 7
            if wire == 2:
                ln, j = varint(rec, j)
                if field == 1:
                    key = rec[j:j + ln]
                elif field == 2:
                    value = rec[j:j + ln]
                j += ln
            elif wire == 0:
                _, j = varint(rec, j)
            else:
                raise SystemExit(f"unexpected wire type {wire} in a record")
        out.append((key, value))


class Bench:
    def __init__(self, bin_, work):
        self.bin, self.work, self.procs = bin_, work, []

    def start(self, args, log_name):
        f = open(os.path.join(self.work, log_name), "w")
        p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def kill_all(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.procs = []

    def drover(self, cfg, *args, timeout=120):
        return subprocess.run([self.bin, "--config", cfg, *args], capture_output=True,
                              text=True, timeout=timeout)

    def server(self, data, extra, log_name):
        grpc, http = free_port(), free_port()
        p = self.start([self.bin, "server", "--data-dir", data, "--listen", f"127.0.0.1:{grpc}",
                        "--http", f"127.0.0.1:{http}", *extra], log_name)
        return p, grpc

    def drover_side(self, n, reps):
        data = os.path.join(self.work, "drover")
        srv, grpc = self.server(data, ["--max-connections-per-address", str(n + 1000)],
                                "server.log")
        cfg, token = os.path.join(data, "client.yaml"), os.path.join(data, "node-token")
        wait("the server's files", lambda: os.path.exists(cfg) and os.path.exists(token), 60)
        self.start([self.bin, "sim", "--server", f"127.0.0.1:{grpc}", "--token-file", token,
                    "--nodes", str(n)], "sim.log")
        ds = os.path.join(self.work, "ds.yaml")
        open(ds, "w").write(DS)
        wait("the apply", lambda: self.drover(cfg, "apply", "-f", ds).returncode == 0, 60)

        def ready():
            r = self.drover(cfg, "get", "ds", "snap", "-o", "json")
            if r.returncode != 0:
                return False
            st = json.loads(r.stdout).get("status", {})
            return st.get("numberReady") == n and st.get("desiredNumberScheduled") == n
        wait(f"{n} pods Ready", ready, 900, every=1.0)
        times, snap = [], os.path.join(self.work, "drover.snapshot")
        for _ in range(reps):
            t0 = time.monotonic()
            r = self.drover(cfg, "cluster", "snapshot", "save", snap, timeout=600)
            if r.returncode != 0:
                raise SystemExit(f"snapshot save failed: {r.stderr}")
            times.append(time.monotonic() - t0)
        kvs = records(snap)
        fig(f"n{n}.drover_objects", len(kvs), "objects")
        fig(f"n{n}.drover_snapshot_size", os.path.getsize(snap) / 2**20, "MiB")
        fig(f"n{n}.drover_save_live", statistics.median(times) * 1e3, "ms")
        self.kill_all()
        # Restore: process start -> first acknowledged write.
        rdata = os.path.join(self.work, "restored")
        t0 = time.monotonic()
        self.server(rdata, ["--restore", snap], "restored.log")
        rcfg = os.path.join(rdata, "client.yaml")
        wait("a write on the restored server", lambda: os.path.exists(rcfg) and self.drover(
            rcfg, "kv", "put", "/bench/after-restore", "x", timeout=30).returncode == 0, 300, 0.02)
        restore = time.monotonic() - t0
        fig(f"n{n}.drover_restore_to_first_write", restore * 1e3, "ms")
        # The same store, idle (no node connected), as etcd's is below.
        idle, again = [], os.path.join(self.work, "drover-idle.snapshot")
        for _ in range(reps):
            t0 = time.monotonic()
            r = self.drover(rcfg, "cluster", "snapshot", "save", again, timeout=600)
            if r.returncode != 0:
                raise SystemExit(f"snapshot save (restored) failed: {r.stderr}")
            idle.append(time.monotonic() - t0)
        fig(f"n{n}.drover_save_idle", statistics.median(idle) * 1e3, "ms")
        for line in open(os.path.join(self.work, "restored.log"), errors="replace"):
            if "ms to read" in line:
                log("server: " + line.strip()[-120:])
        self.kill_all()
        return kvs, statistics.median(idle), os.path.getsize(snap), restore

    def etcd_side(self, n, kvs, reps):
        if not (shutil.which("etcd") and shutil.which("etcdctl")):
            log("SKIPPED the etcd side: no etcd/etcdctl on PATH (Debian: etcd-server etcd-client)")
            return None
        env = dict(os.environ, ETCDCTL_API="3")
        for k in list(env):
            if k.startswith("ETCD_"):
                del env[k]
        client, peer = free_port(), free_port()
        data = os.path.join(self.work, "etcd")

        def start_etcd(d, log_name):
            return self.start(["etcd", "--name", "e0", "--data-dir", d,
                               "--listen-client-urls", f"http://127.0.0.1:{client}",
                               "--advertise-client-urls", f"http://127.0.0.1:{client}",
                               "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                               "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                               "--initial-cluster", f"e0=http://127.0.0.1:{peer}",
                               "--quota-backend-bytes", str(8 << 30)], log_name)

        def put_ok(key=b"/bench/probe", value=b"x"):
            try:
                c = http.client.HTTPConnection("127.0.0.1", client, timeout=5)
                body = json.dumps({"key": base64.b64encode(key).decode(),
                                   "value": base64.b64encode(value).decode()})
                c.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
                ok = c.getresponse().status == 200
                c.close()
                return ok
            except OSError:
                return False

        start_etcd(data, "etcd.log")
        wait("etcd", put_ok, 60)
        # The same keys and values, 16 writers.
        chunks = [kvs[i::16] for i in range(16)]
        errors = []

        def load(part):
            c = http.client.HTTPConnection("127.0.0.1", client, timeout=30)
            for k, v in part:
                body = json.dumps({"key": base64.b64encode(k).decode(),
                                   "value": base64.b64encode(v).decode()})
                c.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(r.status)
            c.close()
        threads = [threading.Thread(target=load, args=(p,)) for p in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit(f"etcd refused {len(errors)} puts")
        times, snap = [], os.path.join(self.work, "etcd.snapshot")
        for _ in range(reps):
            if os.path.exists(snap):
                os.remove(snap)
            t0 = time.monotonic()
            subprocess.run(["etcdctl", "--endpoints", f"http://127.0.0.1:{client}", "snapshot",
                            "save", snap], check=True, capture_output=True, env=env, timeout=600)
            times.append(time.monotonic() - t0)
        fig(f"n{n}.etcd_snapshot_size", os.path.getsize(snap) / 2**20, "MiB")
        fig(f"n{n}.etcd_save", statistics.median(times) * 1e3, "ms")
        self.kill_all()
        rdata = os.path.join(self.work, "etcd-restored")
        t0 = time.monotonic()
        subprocess.run(["etcdctl", "snapshot", "restore", snap, "--data-dir", rdata, "--name", "e0",
                        "--initial-cluster", f"e0=http://127.0.0.1:{peer}",
                        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}"],
                       check=True, capture_output=True, env=env, timeout=600)
        start_etcd(rdata, "etcd-restored.log")
        wait("a put on the restored etcd", put_ok, 300, 0.02)
        restore = time.monotonic() - t0
        fig(f"n{n}.etcd_restore_to_first_write", restore * 1e3, "ms")
        self.kill_all()
        return statistics.median(times), os.path.getsize(snap), restore


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/drover")
    ap.add_argument("--nodes", default="10000")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    for n in [int(x) for x in a.nodes.split(",")]:
        work = tempfile.mkdtemp(prefix="drover-snapbench-")
        b = Bench(os.path.abspath(a.bin), work)
        try:
            kvs, d_save, d_size, d_restore = b.drover_side(n, a.reps)
            e = b.etcd_side(n, kvs, a.reps)
            if e:
                e_save, e_size, e_restore = e
                fig(f"n{n}.save_drover_over_etcd", d_save / e_save, "x")
                fig(f"n{n}.size_drover_over_etcd", d_size / e_size, "x")
                fig(f"n{n}.restore_drover_over_etcd", d_restore / e_restore, "x")
        finally:
            b.kill_all()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
