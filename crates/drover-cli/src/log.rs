//! The process's log: `DROVER_LOG` (an env filter, e.g. `debug` or
//! `drover_agent=debug`) over a default, on stderr, in colour only on a
//! terminal and never with `NO_COLOR` set (no-color.org).

use std::io::IsTerminal;

/// Whether log lines may carry colours: stderr is a terminal and
/// `NO_COLOR` is unset or empty.
pub fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the log: `DROVER_LOG`, else `default` (e.g. `warn`).
pub fn init(default: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG")
                .unwrap_or_else(|_| default.into()),
        )
        .with_ansi(colour())
        .with_writer(std::io::stderr)
        .init();
}
