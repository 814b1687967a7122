//! Versions and the skew policy (`docs/upgrades.md`), pure: what a version
//! string means, whether two releases may run side by side (one minor
//! version apart at most), and the gate of a migration of stored objects
//! (every voting member at least the release that reads the new form).
//!
//! Members report their version in `Cluster.Status` (`version`, since the
//! first release); the caller collects them and asks [`all_at_least`].

use std::collections::BTreeMap;
use std::fmt;

/// A release's version, `MAJOR.MINOR.PATCH` with an optional pre-release
/// (`-rc.1`) and build metadata (`+abc`, ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// false for a pre-release, which comes before the release itself.
    pub release: bool,
}

impl Version {
    /// Parses `1.2.3`, `v1.2.3`, `1.2.3-rc.1`, `1.2.3+build`; None for
    /// anything else.
    pub fn parse(text: &str) -> Option<Version> {
        let t = text.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let t = t.split_once('+').map_or(t, |(v, _)| v);
        let (core, release) = match t.split_once('-') {
            Some((core, pre)) if !pre.is_empty() => (core, false),
            Some(_) => return None,
            None => (t, true),
        };
        let mut parts = core.split('.');
        let mut next = || -> Option<u64> {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse().ok()
        };
        let v = Version {
            major: next()?,
            minor: next()?,
            patch: next()?,
            release,
        };
        parts.next().is_none().then_some(v)
    }

    /// This build's version (the workspace's `version`).
    pub fn this_build() -> Version {
        // The workspace version is a plain MAJOR.MINOR.PATCH (checked by a
        // test); 0.0.0 would only hold every migration back.
        Version::parse(env!("CARGO_PKG_VERSION")).unwrap_or(Version {
            major: 0,
            minor: 0,
            patch: 0,
            release: true,
        })
    }

    /// Whether releases `self` and `other` may run in one cluster: the
    /// same major version, minor versions at most one apart.
    pub fn within_skew(self, other: Version) -> bool {
        self.major == other.major && self.minor.abs_diff(other.minor) <= 1
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.release {
            f.write_str("-pre")?;
        }
        Ok(())
    }
}

/// Why a member holds a migration back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holdback {
    /// It did not answer (its version is unknown).
    NoAnswer { member: u64 },
    /// It reported a version that does not parse.
    Unparsable { member: u64, reported: String },
    /// It runs an older release.
    Older { member: u64, version: Version },
}

impl Holdback {
    fn member(&self) -> u64 {
        match self {
            Holdback::NoAnswer { member }
            | Holdback::Unparsable { member, .. }
            | Holdback::Older { member, .. } => *member,
        }
    }
}

impl fmt::Display for Holdback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holdback::NoAnswer { member } => write!(
                f,
                "member {member:016x} did not report its version: start it (or remove it with `drover cluster remove`)"
            ),
            Holdback::Unparsable { member, reported } => write!(
                f,
                "member {member:016x} reports version {reported:?}, which is not MAJOR.MINOR.PATCH: upgrade it"
            ),
            Holdback::Older { member, version } => write!(
                f,
                "member {member:016x} runs {version}: upgrade it"
            ),
        }
    }
}

/// The gate of a migration that needs release `required`: Ok when every
/// voting member in `voters` reported (in `reported`, by member id) a
/// version at least `required`; else every member that holds it back, in
/// the order of `voters`.
pub fn all_at_least(
    required: Version,
    voters: &[u64],
    reported: &BTreeMap<u64, String>,
) -> Result<(), Vec<Holdback>> {
    let held: Vec<Holdback> = voters
        .iter()
        .filter_map(|&member| match reported.get(&member) {
            None => Some(Holdback::NoAnswer { member }),
            Some(text) => match Version::parse(text) {
                None => Some(Holdback::Unparsable {
                    member,
                    reported: text.clone(),
                }),
                Some(v) if v < required => Some(Holdback::Older { member, version: v }),
                Some(_) => None,
            },
        })
        .collect();
    debug_assert!(held.iter().all(|h| voters.contains(&h.member())));
    if held.is_empty() {
        Ok(())
    } else {
        Err(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|| panic!("{s} parses"))
    }

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(
            v("1.2.3"),
            Version {
                major: 1,
                minor: 2,
                patch: 3,
                release: true
            }
        );
        assert_eq!(v("v0.1.0"), v("0.1.0"));
        assert_eq!(v("0.1.0+abc"), v("0.1.0"));
        assert!(v("0.2.0-rc.1") < v("0.2.0"));
        assert!(v("0.2.0-rc.1") > v("0.1.9"));
        assert!(v("0.10.0") > v("0.9.0"), "numbers, not text");
        for bad in [
            "", "1", "1.2", "1.2.3.4", "1.x.3", "1.2.3-", "-1.2.3", "1..3", " ",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
        assert_eq!(v("0.2.0-rc.1").to_string(), "0.2.0-pre");
        assert_eq!(Version::this_build().to_string(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn one_minor_version_of_skew() {
        assert!(v("0.1.0").within_skew(v("0.2.5")));
        assert!(v("0.2.5").within_skew(v("0.1.0")), "either side newer");
        assert!(v("0.2.0").within_skew(v("0.2.9")));
        assert!(!v("0.1.0").within_skew(v("0.3.0")));
        assert!(!v("1.9.0").within_skew(v("2.0.0")), "never across a major");
    }

    #[test]
    fn the_gate_waits_for_every_voter() {
        let voters = [1, 2, 3];
        let mut reported: BTreeMap<u64, String> = BTreeMap::new();
        reported.insert(1, "0.2.0".into());
        reported.insert(2, "0.2.1".into());
        reported.insert(3, "0.1.0".into());
        let req = v("0.2.0");
        assert_eq!(
            all_at_least(req, &voters, &reported),
            Err(vec![Holdback::Older {
                member: 3,
                version: v("0.1.0")
            }])
        );
        reported.insert(3, "0.2.0-rc.1".into());
        assert!(
            all_at_least(req, &voters, &reported).is_err(),
            "a pre-release is older"
        );
        reported.insert(3, "0.3.0".into());
        assert_eq!(all_at_least(req, &voters, &reported), Ok(()));
        // A member that did not answer, or answered nonsense, holds back;
        // a member that is not a voter (a learner, a tombstone) does not.
        reported.remove(&2);
        reported.insert(1, "garbage".into());
        reported.insert(9, "0.0.1".into());
        let held = all_at_least(req, &voters, &reported).expect_err("held back");
        assert_eq!(
            held,
            vec![
                Holdback::Unparsable {
                    member: 1,
                    reported: "garbage".into()
                },
                Holdback::NoAnswer { member: 2 }
            ]
        );
        assert_eq!(
            held[1].to_string(),
            "member 0000000000000002 did not report its version: start it (or remove it with `drover cluster remove`)"
        );
        assert_eq!(
            all_at_least(req, &[], &reported),
            Ok(()),
            "no voter, nothing to wait for"
        );
    }
}
