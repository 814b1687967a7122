//! A fast, deterministic hasher for the scheduler's maps keyed by short
//! strings (topology pairs, node names): the multiply-rotate hash of
//! rustc's `FxHasher`. Not resistant to chosen keys, which is fine for
//! keys that are node labels counted within one pass.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The hasher.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with [`FxHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_alike_and_pairs_are_told_apart() {
        let mut m: FastMap<(&str, &str), i64> = FastMap::default();
        *m.entry(("zone", "a")).or_default() += 1;
        *m.entry(("zone", "a")).or_default() += 1;
        *m.entry(("zon", "ea")).or_default() += 5;
        assert_eq!(m[&("zone", "a")], 2);
        assert_eq!(m[&("zon", "ea")], 5);
        assert_eq!(m.len(), 2);
    }
}
