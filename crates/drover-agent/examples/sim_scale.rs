//! A scale check of `drover sim` (a report, not a test).
//!
//! ```text
//! cargo run -p drover-agent --example sim_scale -- server DIR      # prints ADDR TOKEN
//! cargo run -p drover-agent --example sim_scale -- sim ADDR TOKEN N [SECONDS]
//! ```
//!
//! The sim runs on a 2-worker tokio runtime and reports how long N nodes
//! take to join, the process's CPU time and RSS while they heartbeat, and
//! how long they take to leave.

use drover_agent::{Sim, SimOptions};
use std::time::{Duration, Instant};

fn cpu_seconds() -> f64 {
    // utime + stime of this process, in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => {
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(async {
                let mut o = drover_server::ServerOptions::new(&args[1]);
                o.listen = Some("127.0.0.1:0".into());
                o.http = Some("127.0.0.1:0".into());
                let s = drover_server::Server::start(o).await?;
                println!("{} {}", s.grpc_addr, s.identity.node_token);
                let _ = s.stopped().await;
                Ok(())
            })
        }
        Some("sim") => {
            let addr = args[1].clone();
            let token = args[2].clone();
            let n: usize = args[3].parse()?;
            let hold: u64 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(20);
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let t0 = Instant::now();
                let sim = Sim::start(SimOptions::new(vec![addr], token, n))?;
                let mut last = 0;
                while sim.connected() < n {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if t0.elapsed() > Duration::from_secs(300) {
                        anyhow::bail!("only {} of {n} joined in 300 s", sim.connected());
                    }
                    let c = sim.connected();
                    if c / 1000 != last / 1000 {
                        println!("{:>6.1}s {c} joined", t0.elapsed().as_secs_f64());
                    }
                    last = c;
                }
                println!(
                    "all {n} joined in {:.2}s; cpu {:.1}s; rss {:.0} MiB",
                    t0.elapsed().as_secs_f64(),
                    cpu_seconds(),
                    rss_mib()
                );
                let c0 = cpu_seconds();
                let h0 = Instant::now();
                tokio::time::sleep(Duration::from_secs(hold)).await;
                let cpu = cpu_seconds() - c0;
                println!(
                    "steady state ({hold}s of heartbeats): {:.1}% of one core, rss {:.0} MiB ({:.1} KiB/node), {} connected",
                    100.0 * cpu / h0.elapsed().as_secs_f64(),
                    rss_mib(),
                    rss_mib() * 1024.0 / n as f64,
                    sim.connected()
                );
                let t = Instant::now();
                let left = sim.shutdown().await;
                println!("{left} of {n} left in {:.2}s", t.elapsed().as_secs_f64());
                Ok(())
            })
        }
        _ => anyhow::bail!("usage: sim_scale server DIR | sim ADDR TOKEN N [SECONDS]"),
    }
}
