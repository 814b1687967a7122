//! The process's file-descriptor limit (a leaf): raised to its hard limit
//! at start where the system allows, and read to size the connection
//! limits ([`crate::limits::connection_limits`]).

// `rlim_t` is `u64` on Linux, not on every system: the casts stay.
#![allow(clippy::unnecessary_cast)]

/// The soft and hard limits on open descriptors (`RLIMIT_NOFILE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFile {
    pub soft: u64,
    pub hard: u64,
}

fn get() -> Option<NoFile> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return None;
    }
    Some(NoFile {
        soft: r.rlim_cur as u64,
        hard: r.rlim_max as u64,
    })
}

/// Raises the soft descriptor limit to the hard one (an unlimited hard
/// limit is taken as 1 Mi: Linux refuses more than `fs.nr_open`, macOS
/// more than `kern.maxfilesperproc`), logs what it did, and answers the
/// limit now in force. Where the system refuses, the soft limit stays and
/// the refusal is logged. `None` where the limit cannot be read: the
/// caller assumes 1024, the common default.
pub fn raise_nofile() -> Option<NoFile> {
    let before = get()?;
    let want = if before.hard == libc::RLIM_INFINITY as u64 {
        1 << 20
    } else {
        before.hard
    };
    if before.soft >= want {
        tracing::info!(
            "file descriptors: limit {} (the hard limit {})",
            before.soft,
            before.hard
        );
        return Some(before);
    }
    let r = libc::rlimit {
        rlim_cur: want as libc::rlim_t,
        rlim_max: before.hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct it is given, nothing else.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        tracing::warn!(
            "file descriptors: cannot raise the limit from {} to {want} ({}); connection limits follow {}",
            before.soft,
            std::io::Error::last_os_error(),
            before.soft
        );
        return Some(before);
    }
    let now = get().unwrap_or(NoFile {
        soft: want,
        hard: before.hard,
    });
    tracing::info!(
        "file descriptors: limit raised from {} to {} (the hard limit)",
        before.soft,
        now.soft
    );
    Some(now)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let now = super::raise_nofile().expect("RLIMIT_NOFILE is readable");
        assert!(now.soft >= 1, "{now:?}");
        if now.hard != libc::RLIM_INFINITY as u64 {
            assert_eq!(now.soft, now.hard, "{now:?}");
        }
    }
}
