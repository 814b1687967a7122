//! `drover exec [-i] [-t]` as kubectl runs it: `-i` streams this process's
//! stdin to the command; `-t` with `-i` on a terminal gives the command a
//! terminal of its own (the agent's runtime allocates it), puts this one in
//! raw mode for the while (restored on every way out) and sends its size,
//! then each change of it (SIGWINCH). As kubectl, `-t` without `-i` is
//! ignored, and `-it` whose stdin is not a terminal says "Unable to use a
//! TTY - input is not a terminal or the right kind of file" and goes on
//! without one.

use crate::args::ExecArgs;
use crate::logs::{self, ExecOptions};
use crate::Client;
use anyhow::Result;
use drover_proto as pb;
use std::io::{IsTerminal, Write};

/// kubectl's words when `-t` cannot be had.
pub const NO_TTY: &str = "Unable to use a TTY - input is not a terminal or the right kind of file";

/// Runs `drover exec`; answers the command's exit code.
pub async fn exec_cmd(
    c: &Client,
    a: ExecArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<i32> {
    let mut o = ExecOptions {
        target: a.target,
        container: a.container,
        namespace: a.namespace,
        command: a.command,
        timeout: Some(a.timeout),
        tty: false,
    };
    if !a.stdin {
        return logs::exec(c, &o, out, err).await;
    }
    if a.tty && !std::io::stdin().is_terminal() {
        writeln!(err, "{NO_TTY}")?;
    }
    if a.tty && std::io::stdin().is_terminal() {
        o.tty = true;
        let raw = RawMode::enter()?;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let watcher = tokio::spawn(watch_size(tx));
        let r = logs::exec_with_tty(c, &o, stdin_reader(), rx, out, err).await;
        watcher.abort();
        drop(raw);
        return r;
    }
    logs::exec_with_stdin(c, &o, stdin_reader(), out, err).await
}

/// The process's stdin as an async reader: a thread copies it (blocking
/// reads) into a pipe, and ends it at stdin's end. A thread still blocked
/// reading when the command ends does not keep the process alive.
pub fn stdin_reader() -> tokio::io::DuplexStream {
    use std::io::Read;
    use tokio::io::AsyncWriteExt;
    let (mut w, r) = tokio::io::duplex(64 * 1024);
    let rt = tokio::runtime::Handle::current();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 32 * 1024];
        let mut stdin = std::io::stdin().lock();
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if rt.block_on(w.write_all(&buf[..n])).is_err() {
                break;
            }
        }
        let _ = rt.block_on(w.shutdown());
    });
    r
}

/// Sends the terminal's size now, then at each SIGWINCH.
async fn watch_size(tx: tokio::sync::mpsc::Sender<pb::TerminalSize>) {
    if let Some(size) = terminal_size() {
        if tx.send(size).await.is_err() {
            return;
        }
    }
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut winch) = signal(SignalKind::window_change()) else {
            return;
        };
        while winch.recv().await.is_some() {
            if let Some(size) = terminal_size() {
                if tx.send(size).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The size of the terminal on stdin (None when it has none).
fn terminal_size() -> Option<pb::TerminalSize> {
    #[cfg(unix)]
    {
        let mut ws = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCGWINSZ writes one `winsize` into the one we pass.
        let r = unsafe { libc::ioctl(libc::STDIN_FILENO, libc::TIOCGWINSZ, &mut ws) };
        if r == 0 && ws.ws_col > 0 && ws.ws_row > 0 {
            return Some(pb::TerminalSize {
                width: u32::from(ws.ws_col),
                height: u32::from(ws.ws_row),
            });
        }
    }
    None
}

/// The terminal on stdin in raw mode (no echo, no line editing, no signals
/// from keys: Ctrl-C goes to the command) until dropped.
struct RawMode {
    #[cfg(unix)]
    saved: libc::termios,
}

impl RawMode {
    fn enter() -> Result<RawMode> {
        #[cfg(unix)]
        {
            // SAFETY: a zeroed termios is a valid value for tcgetattr to
            // fill; both calls only read and write the structs we pass.
            let mut saved: libc::termios = unsafe { std::mem::zeroed() };
            if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } != 0 {
                anyhow::bail!(
                    "drover exec -t: cannot read the terminal's settings: {}",
                    std::io::Error::last_os_error()
                );
            }
            let mut raw = saved;
            // SAFETY: as above, on our own copies.
            unsafe { libc::cfmakeraw(&mut raw) };
            if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw) } != 0 {
                anyhow::bail!(
                    "drover exec -t: cannot put the terminal in raw mode: {}",
                    std::io::Error::last_os_error()
                );
            }
            Ok(RawMode { saved })
        }
        #[cfg(not(unix))]
        Ok(RawMode {})
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: restores the settings read in `enter`.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved);
        }
    }
}
