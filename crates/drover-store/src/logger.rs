//! raft-rs logs through `slog`; this bridges it to `tracing`.

use slog::{Drain, Key, OwnedKVList, Record, Serializer, KV};
use std::fmt::Write as _;

pub(crate) struct TracingDrain;

struct Fields(String);

impl Serializer for Fields {
    fn emit_arguments(&mut self, key: Key, val: &std::fmt::Arguments) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record, values: &OwnedKVList) -> Result<(), slog::Never> {
        let mut f = Fields(String::new());
        let _ = record.kv().serialize(record, &mut f);
        let _ = values.serialize(record, &mut f);
        let msg = record.msg();
        match record.level() {
            slog::Level::Critical | slog::Level::Error => {
                tracing::error!(target: "raft", "{msg}{}", f.0)
            }
            slog::Level::Warning => tracing::warn!(target: "raft", "{msg}{}", f.0),
            slog::Level::Info => tracing::info!(target: "raft", "{msg}{}", f.0),
            slog::Level::Debug => tracing::debug!(target: "raft", "{msg}{}", f.0),
            slog::Level::Trace => tracing::trace!(target: "raft", "{msg}{}", f.0),
        }
        Ok(())
    }
}

pub(crate) fn logger(id: u64) -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), slog::o!("member" => format!("{id:x}")))
}
