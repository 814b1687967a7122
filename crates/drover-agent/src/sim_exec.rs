//! [`crate::SimRuntime`]'s exec sessions (`kubectl exec [-i] [-t]` on sim nodes):
//! the commands of [`crate::sim_runtime`], plus `cat` copying stdin to
//! stdout and `tty`, so that stdin, terminals and exit codes can be tested
//! end to end without Docker. Each session is one task that ends with the
//! command, at its timeout, or when the session is dropped.

use crate::runtime::{ExecEvent, ExecInput, ExecSession, ExecSpec, RuntimeError, EXEC_QUEUE};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What a simulated command gave.
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs the session's command as the runtime's other commands run
/// (`sim_runtime::run_command`), for every command but `cat` and `tty`.
pub(crate) type Runner = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = Ran> + Send>> + Send>;

type Events = mpsc::Sender<Result<ExecEvent, RuntimeError>>;

/// A terminal's output processing (`onlcr`): `\n` becomes `\r\n`.
fn onlcr(data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(data.len() + data.len() / 8);
    for &b in data {
        if b == b'\n' {
            v.push(b'\r');
        }
        v.push(b);
    }
    v
}

/// One in a counter while alive.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(n: Arc<AtomicUsize>) -> Counted {
        n.fetch_add(1, Ordering::SeqCst);
        Counted(n)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts `spec.cmd` (in a running container, checked by the caller),
/// counted in `open` while it runs.
pub(crate) fn start(runner: Runner, open: Arc<AtomicUsize>, spec: ExecSpec) -> ExecSession {
    let (input, input_rx) = mpsc::channel(EXEC_QUEUE);
    let (tx, events) = mpsc::channel(EXEC_QUEUE);
    let count = Counted::new(open);
    tokio::spawn(async move {
        let _count = count;
        let deadline = tokio::time::sleep(spec.timeout);
        tokio::select! {
            _ = run(runner, &spec, input_rx, &tx) => {}
            _ = deadline => { let _ = tx.send(Ok(ExecEvent::Exit(-1))).await; }
            _ = tx.closed() => {}
        }
    });
    ExecSession { input, events }
}

async fn run(runner: Runner, spec: &ExecSpec, mut input: mpsc::Receiver<ExecInput>, tx: &Events) {
    let tty = spec.tty;
    let out = |data: &[u8]| {
        if tty {
            ExecEvent::Stdout(onlcr(data))
        } else {
            ExecEvent::Stdout(data.to_vec())
        }
    };
    let program = spec
        .cmd
        .first()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or_default();
    let code = match (program, spec.cmd.len()) {
        ("cat", 1) => {
            // Without stdin the command reads nothing: EOF at once.
            if spec.stdin {
                loop {
                    match input.recv().await {
                        Some(ExecInput::Stdin(data)) => {
                            if tx.send(Ok(out(&data))).await.is_err() {
                                return;
                            }
                        }
                        Some(ExecInput::Resize { .. }) => {}
                        Some(ExecInput::CloseStdin) | None => break,
                    }
                }
            }
            0
        }
        ("tty", 1) => {
            let (text, code) = if tty {
                ("/dev/pts/0\n", 0)
            } else {
                ("not a tty\n", 1)
            };
            if tx.send(Ok(out(text.as_bytes()))).await.is_err() {
                return;
            }
            code
        }
        _ => {
            let r = runner().await;
            if !r.stdout.is_empty() && tx.send(Ok(out(r.stdout.as_bytes()))).await.is_err() {
                return;
            }
            if !r.stderr.is_empty() {
                let e = if tty {
                    out(r.stderr.as_bytes())
                } else {
                    ExecEvent::Stderr(r.stderr.into_bytes())
                };
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
            if r.code == -1 {
                // At the timeout: the select's deadline ends the session.
                std::future::pending::<()>().await;
            }
            r.code
        }
    };
    let _ = tx.send(Ok(ExecEvent::Exit(code))).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(cmd: &[&str], stdin: bool, tty: bool) -> ExecSpec {
        ExecSpec {
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            stdin,
            tty,
            timeout: Duration::from_secs(5),
        }
    }

    /// `cat` and `tty` never run the runtime's commands.
    fn own(open: &Arc<AtomicUsize>, s: ExecSpec) -> ExecSession {
        let runner: Runner = Box::new(|| unreachable!("cat and tty are the session's own"));
        start(runner, open.clone(), s)
    }

    pub(crate) async fn drain(mut s: ExecSession) -> (Vec<ExecEvent>, i32) {
        let mut seen = Vec::new();
        while let Some(e) = s.events.recv().await {
            match e.expect("no error") {
                ExecEvent::Exit(c) => return (seen, c),
                other => seen.push(other),
            }
        }
        panic!("the session ended without an exit code: {seen:?}")
    }

    #[tokio::test]
    async fn cat_echoes_stdin_until_it_is_closed() {
        let open = Arc::default();
        let s = own(&open, spec(&["cat"], true, false));
        s.input
            .send(ExecInput::Stdin(b"one\n".to_vec()))
            .await
            .unwrap();
        s.input
            .send(ExecInput::Stdin(b"two\n".to_vec()))
            .await
            .unwrap();
        s.input.send(ExecInput::CloseStdin).await.unwrap();
        let (out, code) = drain(s).await;
        assert_eq!(code, 0);
        assert_eq!(
            out,
            [
                ExecEvent::Stdout(b"one\n".to_vec()),
                ExecEvent::Stdout(b"two\n".to_vec())
            ]
        );
        // A terminal turns line ends into CRLF; dropping the input is EOF.
        let s = own(&open, spec(&["cat"], true, true));
        s.input
            .send(ExecInput::Stdin(b"a\nb".to_vec()))
            .await
            .unwrap();
        let ExecSession { input, events } = s;
        drop(input);
        let (out, code) = drain(ExecSession {
            input: mpsc::channel(1).0,
            events,
        })
        .await;
        assert_eq!(
            (out, code),
            (vec![ExecEvent::Stdout(b"a\r\nb".to_vec())], 0)
        );
    }

    #[tokio::test]
    async fn tty_says_whether_there_is_one() {
        let open = Arc::default();
        let (out, code) = drain(own(&open, spec(&["tty"], false, true))).await;
        assert_eq!(
            (out, code),
            (vec![ExecEvent::Stdout(b"/dev/pts/0\r\n".to_vec())], 0)
        );
        let (out, code) = drain(own(&open, spec(&["tty"], true, false))).await;
        assert_eq!(
            (out, code),
            (vec![ExecEvent::Stdout(b"not a tty\n".to_vec())], 1)
        );
    }

    #[tokio::test]
    async fn a_session_ends_at_its_timeout_or_when_dropped() {
        let open = Arc::new(AtomicUsize::new(0));
        let mut sp = spec(&["cat"], true, false);
        sp.timeout = Duration::from_millis(20);
        let s = own(&open, sp);
        assert_eq!(open.load(Ordering::SeqCst), 1);
        let (_, code) = drain(s).await;
        assert_eq!(code, -1);
        let s = own(&open, spec(&["cat"], true, false));
        drop(s);
        for _ in 0..1000 {
            if open.load(Ordering::SeqCst) == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(open.load(Ordering::SeqCst), 0);
    }
}
