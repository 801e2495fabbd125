//! Time as S3 answers carry it: now and inode times (ns since the epoch) as `SystemTime`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, in nanoseconds since the epoch.
pub fn now_ns() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
}

/// An inode time (ns since the epoch) as `SystemTime`; times before the epoch as it.
pub fn system_time(ns: i64) -> SystemTime {
    let ns = u64::try_from(ns).unwrap_or(0);
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// Now, in seconds since the epoch.
pub fn now_secs() -> i64 {
    now_ns() / 1_000_000_000
}
