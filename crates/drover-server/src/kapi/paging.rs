//! Continue keys of paged lists: a page ends after the object whose
//! `namespace/name` (`/name` for a cluster-scoped kind) the continue token
//! carries, in the order of the store's keys, whether the page is read
//! from the store ([`super::read`]) or from the informer
//! ([`super::cached`]).

use super::status::Refusal;
use base64::Engine;
use drover_api::{Kind, Manifest};

/// The longest continue token drover reads.
const MAX_CONTINUE_BYTES: usize = 2048;

/// A continue token: base64 of the key (`namespace/name`) of the last
/// object of the page before.
pub fn continue_token(after: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(after)
}

pub fn read_continue(token: &str) -> Result<String, Refusal> {
    let bad = || {
        Refusal::bad_request(format!(
            "continue {token:?}: not a continue token this server gave out; list again from the start"
        ))
    };
    if token.len() > MAX_CONTINUE_BYTES {
        return Err(bad());
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    String::from_utf8(bytes).map_err(|_| bad())
}

pub fn sort_key(m: &Manifest) -> String {
    format!("{}/{}", m.namespace(), m.name())
}

/// [`sort_key`] of the object stored at `key` (`/registry/<plural>/…`),
/// without decoding it: store keys and sort keys order alike.
pub fn key_sort(kind: Kind, key: &str) -> String {
    let rest = key
        .strip_prefix("/registry/")
        .and_then(|k| k.split_once('/'))
        .map_or("", |(_, rest)| rest);
    if kind.namespaced() {
        rest.to_string()
    } else {
        format!("/{rest}")
    }
}

/// The store key the continue key `after` (`namespace/name`, or `/name`
/// for a cluster-scoped kind) stands for.
pub fn store_key(kind: Kind, after: &str) -> String {
    if kind.namespaced() {
        format!("/registry/{}/{after}", kind.plural())
    } else {
        format!("/registry/{}{after}", kind.plural())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_are_checked() {
        let t = continue_token("default/web-1");
        assert_eq!(read_continue(&t).unwrap(), "default/web-1");
        assert!(read_continue("!!!").is_err());
        assert!(read_continue(&"A".repeat(5000)).is_err());
    }
}
