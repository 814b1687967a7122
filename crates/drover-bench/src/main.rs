//! `drover-bench`: drover against etcd on this machine, with the same
//! workload generator and a Rust gRPC client for each.
//!
//! It starts a 3-member drover cluster (the release binary) and a 3-member
//! etcd cluster (Debian's `etcd-server` 3.4) on loopback, one after the
//! other, and measures for each: sequential put latency, throughput with N
//! concurrent writers, SIGKILL-leader-to-next-successful-write, RSS per
//! member after the load, and full restart to the first successful write.
//! With `--runs N` it does all of it N times, alternating which system goes
//! first. Each measurement is logged on stderr as it is taken; at the end
//! every figure is one `system.name: value unit` line on stdout (the median
//! of the runs), then a markdown table of drover/etcd ratios. Diagnostics
//! go to stderr, prefixed with `#`. Every process and directory it creates is removed on exit,
//! error, Ctrl-C or SIGTERM, and the whole run is bounded by
//! `--max-seconds`.
//!
//! Run from the repository root: `bench/run.sh` (builds, then runs this).

mod cluster;
mod drover;
mod etcd;
mod etcd_client;
mod report;
mod target;
mod workload;

use anyhow::{bail, Context, Result};
use clap::Parser;
use cluster::{all_healthy, Cluster};
use report::{Better, Report};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use workload::{percentile, Probe};

#[derive(Parser, Debug)]
#[command(
    name = "drover-bench",
    about = "drover vs etcd: the same workload against both, on loopback"
)]
struct Opts {
    /// The drover binary (a release build).
    #[arg(long, default_value = "target/release/drover")]
    drover_bin: PathBuf,
    /// The etcd server binary (3.4).
    #[arg(long, default_value = "etcd")]
    etcd_bin: PathBuf,
    /// Run etcd without TLS (plain HTTP on client and peer URLs). By
    /// default etcd runs with client and peer TLS, as drover always does.
    #[arg(long)]
    etcd_plain: bool,
    /// Systems to run, in this order.
    #[arg(long, value_delimiter = ',', default_value = "drover,etcd")]
    systems: Vec<String>,
    /// Value size of every put, in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Sequential puts (single client), after 50 uncounted ones.
    #[arg(long, default_value_t = 2000)]
    seq_puts: usize,
    /// Concurrent writer counts, one throughput window each.
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    writers: Vec<usize>,
    /// Length of each counted throughput window, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Uncounted warm-up before each throughput window, in seconds.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Leader SIGKILL rounds (the killed member is restarted after each).
    #[arg(long, default_value_t = 3)]
    failover_rounds: usize,
    /// Where the throw-away data dirs go (a fresh temp dir inside it).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    workdir: PathBuf,
    /// Keep the temp dir (data dirs and member logs) for inspection.
    #[arg(long)]
    keep_workdir: bool,
    /// Repeat everything this many times (alternating which system goes
    /// first) and report medians.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=20))]
    runs: u64,
    /// Bound on the whole run, in seconds.
    #[arg(long, default_value_t = 900)]
    max_seconds: u64,
}

/// How availability is probed after a kill or a restart.
const PROBE: Probe = Probe {
    interval: Duration::from_millis(10),
    attempt_timeout: Duration::from_secs(3),
    limit: Duration::from_secs(30),
};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> ExitCode {
    let opts = Opts::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("# error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = rt.block_on(async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("# error: cannot handle SIGTERM: {e}");
                    return ExitCode::FAILURE;
                }
            };
        let limit = Duration::from_secs(opts.max_seconds);
        // Leaving this select drops the run: members are killed and the
        // temp dir removed by their Drop impls.
        tokio::select! {
            r = tokio::time::timeout(limit, run(&opts)) => match r {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => {
                    eprintln!("# error: {e:#}");
                    ExitCode::FAILURE
                }
                Err(_) => {
                    eprintln!("# error: the run exceeded --max-seconds {}", opts.max_seconds);
                    ExitCode::from(3)
                }
            },
            _ = tokio::signal::ctrl_c() => {
                eprintln!("# interrupted (SIGINT): cleaning up");
                ExitCode::from(130)
            }
            _ = term.recv() => {
                eprintln!("# terminated (SIGTERM): cleaning up");
                ExitCode::from(143)
            }
        }
    });
    // Stray writer tasks must not hold up the exit.
    rt.shutdown_timeout(Duration::from_secs(2));
    code
}

async fn run(o: &Opts) -> Result<()> {
    for s in &o.systems {
        if s != "drover" && s != "etcd" {
            bail!("--systems: unknown system {s:?} (drover, etcd)");
        }
    }
    if o.writers.is_empty() || o.writers.contains(&0) {
        bail!("--writers: give one or more counts above zero");
    }
    let drover_bin = std::fs::canonicalize(&o.drover_bin).with_context(|| {
        format!(
            "--drover-bin {}: not found (cargo build --release --bin drover)",
            o.drover_bin.display()
        )
    })?;
    let mut work = tempfile::Builder::new()
        .prefix("drover-bench.")
        .tempdir_in(&o.workdir)
        .with_context(|| format!("cannot create a temp dir in {}", o.workdir.display()))?;
    if o.keep_workdir {
        work.disable_cleanup(true);
    }
    machine_info(o, &drover_bin, work.path());

    let mut rep = Report::default();
    let mut failures = Vec::new();
    for run in 1..=o.runs {
        rep.run = run;
        // Alternate the order, so a slow spell of the shared machine does
        // not always land on the same system.
        let mut order: Vec<&String> = o.systems.iter().collect();
        if run % 2 == 0 {
            order.reverse();
        }
        eprintln!("# ==== run {run}/{}: loadavg {}", o.runs, loadavg());
        fsync_probe(work.path(), &mut rep)?;
        for s in order {
            let dir = work.path().join(format!("run{run}-{s}"));
            std::fs::create_dir_all(&dir)?;
            let r = if s == "drover" {
                // Members bind port 0 and record the ports they got.
                eprintln!("# == {s}: data dirs and logs in {}", dir.display());
                let mut c = drover::DroverCluster::new(&drover_bin, &dir);
                bench(&mut c, o, &mut rep).await
            } else {
                let ports = cluster::free_ports(6)?;
                eprintln!(
                    "# == {s}: ports {ports:?}, data dirs and logs in {}",
                    dir.display()
                );
                let mut c = etcd::EtcdCluster::new(&o.etcd_bin, &dir, &ports, !o.etcd_plain)?;
                bench(&mut c, o, &mut rep).await
            };
            if let Err(e) = r {
                eprintln!("# run {run}: {s}: FAILED: {e:#}");
                failures.push(format!("run {run}: {s}"));
            }
            if !o.keep_workdir {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
    eprintln!("# loadavg at the end: {}", loadavg());
    for s in &o.systems {
        rep.pool(s, "failover_round", "failover_median", "failover_max");
    }
    let mut names: Vec<&str> = vec!["machine"];
    names.extend(o.systems.iter().map(String::as_str));
    println!("{}", rep.summary(&names).trim_end());
    if o.systems.len() == 2 {
        if o.runs > 1 {
            println!("\nMedians of {} runs.", o.runs);
        }
        println!();
        print!("{}", rep.ratio_table(&o.systems[0], &o.systems[1]));
    }
    if o.keep_workdir {
        eprintln!("# kept {}", work.path().display());
    }
    if !failures.is_empty() {
        bail!(
            "failed: {} (figures above are partial)",
            failures.join(", ")
        );
    }
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Prints the machine and versions as diagnostics.
fn machine_info(o: &Opts, drover_bin: &std::path::Path, work: &std::path::Path) {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mem = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:").map(|v| v.trim().to_string()))
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    eprintln!(
        "# host: {cpus} cpus, MemTotal {mem}, kernel {}",
        read("/proc/sys/kernel/osrelease").trim()
    );
    let drover_version = std::process::Command::new(drover_bin)
        .arg("--version")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("? ({e})"));
    eprintln!("# drover: {} ({drover_version})", drover_bin.display());
    if o.systems.iter().any(|s| s == "etcd") {
        match etcd::version(&o.etcd_bin) {
            Ok(v) => eprintln!(
                "# etcd: {} ({v}), {}",
                o.etcd_bin.display(),
                if o.etcd_plain {
                    "plain HTTP (--etcd-plain)"
                } else {
                    "client and peer TLS"
                }
            ),
            Err(e) => eprintln!("# etcd: {e:#}"),
        }
    }
    eprintln!("# workdir: {}", work.display());
}

/// The disk's raw fdatasync latency (4 KiB appends), context for the
/// sequential latencies: both systems fsync every write.
fn fsync_probe(dir: &std::path::Path, rep: &mut Report) -> Result<()> {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let buf = [0x5au8; 4096];
    let mut lat = Vec::with_capacity(300);
    for _ in 0..300 {
        f.write_all(&buf)?;
        let t0 = Instant::now();
        f.sync_data()?;
        lat.push(t0.elapsed());
    }
    drop(f);
    std::fs::remove_file(&path)?;
    lat.sort();
    rep.record(
        "machine",
        "disk_fdatasync_p50",
        ms(percentile(&lat, 50.0)),
        "ms",
        Better::Info,
    );
    rep.record(
        "machine",
        "disk_fdatasync_p99",
        ms(percentile(&lat, 99.0)),
        "ms",
        Better::Info,
    );
    Ok(())
}

/// Every phase against one cluster. On error the members' log tails go to
/// stderr; the members themselves are killed when `c` is dropped.
async fn bench<C: Cluster>(c: &mut C, o: &Opts, rep: &mut Report) -> Result<()> {
    let r = phases(c, o, rep).await;
    if r.is_err() {
        for m in c.members() {
            eprintln!("# --- tail of {} log:", m.name);
            for l in m.log_tail(8).lines() {
                eprintln!("#   {l}");
            }
        }
    }
    // A graceful stop, so the next system starts on a quiet machine.
    for m in c.members() {
        m.terminate(Duration::from_secs(10)).await;
    }
    r
}

async fn phases<C: Cluster>(c: &mut C, o: &Opts, rep: &mut Report) -> Result<()> {
    let sys = c.name();
    let value = workload::value(o.value_size);

    let t0 = Instant::now();
    c.bootstrap().await.context("bootstrap")?;
    rep.record(sys, "bootstrap", ms(t0.elapsed()), "ms", Better::Info);

    // Sequential puts: one client, one connection, to the leader.
    let l = c.leader().await?;
    let t = c.target(l)?;
    let s = workload::sequential(&t, o.seq_puts, 50, &value, Duration::from_secs(120))
        .await
        .context("sequential puts")?;
    let lat = &s.latencies;
    rep.record(
        sys,
        "seq_put_p50",
        ms(percentile(lat, 50.0)),
        "ms",
        Better::Lower,
    );
    rep.record(
        sys,
        "seq_put_p99",
        ms(percentile(lat, 99.0)),
        "ms",
        Better::Lower,
    );
    rep.record(
        sys,
        "seq_put_max",
        ms(percentile(lat, 100.0)),
        "ms",
        Better::Lower,
    );
    rep.record(
        sys,
        "seq_put_throughput",
        lat.len() as f64 / s.wall.as_secs_f64(),
        "ops/s",
        Better::Higher,
    );
    match t.count("bench/seq/").await {
        Ok(n) if n == lat.len() as u64 => {}
        Ok(n) => eprintln!(
            "# {sys}: WARNING: {} sequential puts acknowledged, {n} keys read back",
            lat.len()
        ),
        Err(e) => eprintln!("# {sys}: WARNING: reading the sequential keys back failed: {e:#}"),
    }

    // Throughput: W writers, each on its own connection, to the leader.
    for &w in &o.writers {
        let l = c.leader().await?;
        let targets = (0..w).map(|_| c.target(l)).collect::<Result<Vec<_>>>()?;
        let pids: Vec<u32> = c.members().iter().filter_map(|m| m.pid()).collect();
        let r = workload::concurrent(
            targets,
            &value,
            Duration::from_secs_f64(o.warmup),
            Duration::from_secs_f64(o.seconds),
            &pids,
        )
        .await
        .with_context(|| format!("{w} concurrent writers"))?;
        let secs = r.window.as_secs_f64();
        let p = format!("conc{w}_");
        rep.record(
            sys,
            &format!("{p}throughput"),
            r.latencies.len() as f64 / secs,
            "ops/s",
            Better::Higher,
        );
        rep.record(
            sys,
            &format!("{p}p50"),
            ms(percentile(&r.latencies, 50.0)),
            "ms",
            Better::Lower,
        );
        rep.record(
            sys,
            &format!("{p}p99"),
            ms(percentile(&r.latencies, 99.0)),
            "ms",
            Better::Lower,
        );
        rep.record(
            sys,
            &format!("{p}errors"),
            r.errors as f64,
            "count",
            Better::Info,
        );
        rep.record(
            sys,
            &format!("{p}server_cpu"),
            100.0 * r.server_cpu.as_secs_f64() / secs,
            "%",
            Better::Info,
        );
        rep.record(
            sys,
            &format!("{p}client_cpu"),
            100.0 * r.client_cpu.as_secs_f64() / secs,
            "%",
            Better::Info,
        );
        if let Some(e) = r.first_error {
            eprintln!("# {sys}: {w} writers: first error: {e}");
        }
    }

    // RSS of every member after the load.
    let mut max = 0.0f64;
    for (i, m) in c.members().iter().enumerate() {
        let mib = m.rss_kib().context("reading VmRSS")? as f64 / 1024.0;
        max = max.max(mib);
        rep.record(sys, &format!("rss_m{}", i + 1), mib, "MiB", Better::Lower);
    }
    rep.record(sys, "rss_max", max, "MiB", Better::Lower);

    // Failover: SIGKILL the leader, probe the survivors until a put succeeds.
    for r in 1..=o.failover_rounds {
        let l = c.leader().await?;
        let survivors: Vec<usize> = (0..3).filter(|&i| i != l).collect();
        let pid = c.members()[l].pid().unwrap_or_default();
        let t0 = Instant::now();
        c.members()[l].sigkill();
        let fw = workload::first_write(
            t0,
            &survivors,
            |i| c.target(i),
            &format!("bench/failover/{r}"),
            &value,
            PROBE,
        )
        .await;
        c.members()[l].kill();
        let name = format!("failover_round{r}");
        match fw {
            Ok(f) => {
                rep.record(sys, &name, ms(f.elapsed), "ms", Better::Lower);
                eprintln!(
                    "# {sys}: failover round {r}: killed m{} (pid {pid}); first put ok via m{} after {} attempts \
                     ({} still pending); failed attempts: {:?}",
                    l + 1,
                    f.via + 1,
                    f.attempts,
                    f.pending,
                    f.errors
                );
            }
            Err(e) => {
                rep.failed(sys, &name, "ms", Better::Lower);
                eprintln!("# {sys}: failover round {r}: {e:#}");
            }
        }
        c.members()[l].start()?;
        all_healthy(c.members(), Duration::from_secs(30))
            .await
            .with_context(|| format!("after failover round {r}, m{} restarted", l + 1))?;
    }
    // Restart: SIGTERM every member, start all, time to the first put.
    for m in c.members() {
        if !m.terminate(Duration::from_secs(10)).await {
            eprintln!(
                "# {sys}: {} ignored SIGTERM for 10 s and was killed",
                m.name
            );
        }
    }
    let t0 = Instant::now();
    for m in c.members() {
        m.start()?;
    }
    let all: Vec<usize> = (0..3).collect();
    let fw = workload::first_write(t0, &all, |i| c.target(i), "bench/restart", &value, PROBE)
        .await
        .context("restart: first write")?;
    rep.record(
        sys,
        "restart_first_write",
        ms(fw.elapsed),
        "ms",
        Better::Lower,
    );
    all_healthy(c.members(), Duration::from_secs(30))
        .await
        .context("restart")?;
    rep.record(
        sys,
        "restart_all_healthy",
        ms(t0.elapsed()),
        "ms",
        Better::Lower,
    );
    for m in c.members() {
        if !m.running() {
            bail!("{} exited at the end of the run", m.name);
        }
    }
    Ok(())
}
