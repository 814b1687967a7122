//! Figures: a `# run K: system.name: value unit` line on stderr as each is
//! measured; at the end one `system.name: value unit` line per figure on
//! stdout (the median over the runs) and a markdown table of ratios.

use std::collections::HashMap;

/// Which way a figure is better, for the reader of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Context, not a goal (CPU use, error counts, bootstrap time).
    Info,
}

/// Every measurement of one figure of one system.
#[derive(Debug, Clone)]
struct Figure {
    /// One entry per measurement; None: the measurement failed.
    values: Vec<Option<f64>>,
    unit: &'static str,
    better: Better,
}

impl Figure {
    /// The median of the successful measurements.
    fn median(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.values.iter().flatten().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        })
    }

    fn failures(&self) -> usize {
        self.values.iter().filter(|v| v.is_none()).count()
    }

    /// The median, and how many measurements failed if any did.
    fn cell(&self) -> String {
        let m = self.median().map(|v| format_value(v, self.unit));
        match (m, self.failures()) {
            (Some(m), 0) => m,
            (Some(m), n) => format!("{m} ({n} failed)"),
            (None, _) => "failed".to_string(),
        }
    }
}

/// Every figure of every system, in the order they were first measured.
#[derive(Default)]
pub struct Report {
    /// The current run (1-based), for the progress lines.
    pub run: u64,
    order: Vec<String>,
    figures: HashMap<(String, String), Figure>,
}

fn format_value(v: f64, unit: &str) -> String {
    match unit {
        "ms" => format!("{v:.3}"),
        "count" | "ops" => format!("{v:.0}"),
        _ => format!("{v:.1}"),
    }
}

impl Report {
    /// Records a measurement and prints it as progress.
    pub fn record(
        &mut self,
        system: &str,
        name: &str,
        value: f64,
        unit: &'static str,
        better: Better,
    ) {
        eprintln!(
            "# run {}: {system}.{name}: {} {unit}",
            self.run,
            format_value(value, unit)
        );
        self.insert(system, name, Some(value), unit, better);
    }

    /// Records a measurement that failed.
    pub fn failed(&mut self, system: &str, name: &str, unit: &'static str, better: Better) {
        eprintln!("# run {}: {system}.{name}: failed {unit}", self.run);
        self.insert(system, name, None, unit, better);
    }

    fn insert(
        &mut self,
        system: &str,
        name: &str,
        value: Option<f64>,
        unit: &'static str,
        better: Better,
    ) {
        if !self.order.iter().any(|n| n == name) {
            self.order.push(name.to_string());
        }
        self.figures
            .entry((system.to_string(), name.to_string()))
            .or_insert(Figure {
                values: Vec::new(),
                unit,
                better,
            })
            .values
            .push(value);
    }

    /// Adds two figures to `system`: the median and the maximum of every
    /// measurement of every figure whose name starts with `prefix`, pooled
    /// over all of them (e.g. every failover round of every run). They are
    /// listed right after the last pooled figure.
    pub fn pool(&mut self, system: &str, prefix: &str, median_name: &str, max_name: &str) {
        let pooled: Vec<&Figure> = self
            .figures
            .iter()
            .filter(|((s, n), _)| s == system && n.starts_with(prefix))
            .map(|(_, f)| f)
            .collect();
        let Some(first) = pooled.first() else { return };
        let (unit, better) = (first.unit, first.better);
        let all = Figure {
            values: pooled
                .iter()
                .flat_map(|f| f.values.iter().copied())
                .collect(),
            unit,
            better,
        };
        // The maximum keeps the failed measurements, so both cells say so.
        let mut max = Figure {
            values: all.values.iter().filter(|v| v.is_none()).copied().collect(),
            unit,
            better,
        };
        if let Some(m) = all.values.iter().flatten().copied().reduce(f64::max) {
            max.values.push(Some(m));
        }
        let at = self
            .order
            .iter()
            .rposition(|n| n.starts_with(prefix))
            .map_or(self.order.len(), |i| i + 1);
        for (k, name) in [median_name, max_name].into_iter().enumerate() {
            if !self.order.iter().any(|n| n == name) {
                self.order.insert(at + k, name.to_string());
            }
        }
        self.figures
            .insert((system.to_string(), median_name.to_string()), all);
        self.figures
            .insert((system.to_string(), max_name.to_string()), max);
    }

    /// One `system.name: median unit` line per figure of each system
    /// (`failed` when every measurement of it failed).
    pub fn summary(&self, systems: &[&str]) -> String {
        let mut out = String::new();
        for s in systems {
            for name in &self.order {
                if let Some(f) = self.figures.get(&(s.to_string(), name.clone())) {
                    let v = f
                        .median()
                        .map_or("failed".to_string(), |v| format_value(v, f.unit));
                    out.push_str(&format!("{s}.{name}: {v} {}\n", f.unit));
                }
            }
        }
        out
    }

    /// The markdown table `figure | unit | a | b | a/b | better` of medians.
    pub fn ratio_table(&self, a: &str, b: &str) -> String {
        let mut out = format!(
            "| figure | unit | {a} | {b} | {a}/{b} | better |\n|---|---|---:|---:|---:|---|\n"
        );
        for name in &self.order {
            let fa = self.figures.get(&(a.to_string(), name.clone()));
            let fb = self.figures.get(&(b.to_string(), name.clone()));
            let Some(any) = fa.or(fb) else { continue };
            let cell = |f: Option<&Figure>| f.map_or("-".to_string(), Figure::cell);
            let ratio = match (fa.and_then(Figure::median), fb.and_then(Figure::median)) {
                (Some(x), Some(y)) if y != 0.0 => format!("{:.2}", x / y),
                _ => "-".to_string(),
            };
            let better = match any.better {
                Better::Lower => "lower",
                Better::Higher => "higher",
                Better::Info => "-",
            };
            out.push_str(&format!(
                "| {name} | {} | {} | {} | {ratio} | {better} |\n",
                any.unit,
                cell(fa),
                cell(fb)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_pooling_and_table() {
        let mut r = Report::default();
        for (run, (a, b)) in [(10.0, 20.0), (30.0, 20.0), (20.0, 40.0)]
            .into_iter()
            .enumerate()
        {
            r.run = run as u64 + 1;
            r.record("drover", "failover_round1", a, "ms", Better::Lower);
            r.record("etcd", "failover_round1", b, "ms", Better::Lower);
            r.record("drover", "failover_round2", a + 1.0, "ms", Better::Lower);
            r.record("drover", "rss_max", 50.0, "MiB", Better::Lower);
        }
        r.failed("etcd", "failover_round2", "ms", Better::Lower);
        r.pool(
            "drover",
            "failover_round",
            "failover_median",
            "failover_max",
        );
        r.pool("etcd", "failover_round", "failover_median", "failover_max");
        let s = r.summary(&["drover", "etcd"]);
        assert!(s.contains("drover.failover_round1: 20.000 ms\n"), "{s}");
        // Pooled: 10 20 30 11 21 31 -> median (20 + 21) / 2, max 31.
        assert!(s.contains("drover.failover_median: 20.500 ms\n"), "{s}");
        assert!(s.contains("drover.failover_max: 31.000 ms\n"), "{s}");
        assert!(s.contains("etcd.failover_round2: failed ms\n"), "{s}");
        let t = r.ratio_table("drover", "etcd");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[2],
            "| failover_round1 | ms | 20.000 | 20.000 | 1.00 | lower |"
        );
        assert_eq!(
            lines[4],
            "| failover_median | ms | 20.500 | 20.000 (1 failed) | 1.02 | lower |"
        );
        assert_eq!(lines[6], "| rss_max | MiB | 50.0 | - | - | lower |");
    }
}
