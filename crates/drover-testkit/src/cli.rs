//! The output of the client's commands as the tests run them in-process:
//! what a command printed and how it ended ([`Ran`]), and a writer the
//! test reads while a command still runs ([`SharedBuf`]).

use std::sync::{Arc, Mutex};

/// What a command printed, and how it ended (its error as `drover` would
/// print it).
#[derive(Debug)]
pub struct Ran {
    pub out: String,
    pub err: String,
    pub error: Option<String>,
}

impl Ran {
    /// The outcome of a command that wrote `out` and `err` and returned `r`.
    pub fn new<T>(out: Vec<u8>, err: Vec<u8>, r: anyhow::Result<T>) -> Ran {
        Ran {
            out: String::from_utf8(out).expect("utf-8"),
            err: String::from_utf8(err).expect("utf-8"),
            error: r.err().map(|e| drover_cli::error_text(&e)),
        }
    }

    /// Panics unless the command succeeded.
    #[track_caller]
    pub fn ok(self) -> Ran {
        assert!(self.error.is_none(), "the command failed: {self:?}");
        self
    }

    /// Panics unless the command failed.
    #[track_caller]
    pub fn failed(self) -> Ran {
        assert!(self.error.is_some(), "the command succeeded: {self:?}");
        self
    }

    /// Panics unless the command failed with an error that says `text`.
    #[track_caller]
    pub fn failed_with(self, text: &str) -> Ran {
        let e = self.error.as_deref().unwrap_or_default();
        assert!(
            e.contains(text),
            "expected an error with {text:?}: {self:?}"
        );
        self
    }

    /// The error, or "" when it succeeded.
    pub fn error(&self) -> &str {
        self.error.as_deref().unwrap_or("")
    }

    /// The lines of its standard output.
    pub fn lines(&self) -> Vec<&str> {
        self.out.lines().collect()
    }
}

/// A `Write` the test reads (with [`SharedBuf::text`]) while the command
/// that writes it still runs.
#[derive(Clone, Default)]
pub struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    /// What was written so far (it must be UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).expect("utf-8")
    }
}

impl std::io::Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
