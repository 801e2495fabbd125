//! What keeps an inode from changing: Linux's immutable and append-only flags
//! (`chattr +i`/`+a`) and S3 object lock (retention until a date, legal hold). The
//! metadata layer enforces them for every front end (docs/SEMANTICS.md, "Immutable
//! files and object lock"); this module only says what an inode carries.

use crate::Nanos;

/// `FS_IMMUTABLE_FL` of `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS`.
pub const FS_IMMUTABLE_FL: u32 = 0x10;
/// `FS_APPEND_FL` of `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS`.
pub const FS_APPEND_FL: u32 = 0x20;

/// How strictly an object lock's retention holds (S3's two modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetentionMode {
    /// Callers allowed to bypass governance may shorten or remove it.
    Governance,
    /// Nobody may shorten or remove it before it ends, not even root.
    Compliance,
}

impl RetentionMode {
    /// S3's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            RetentionMode::Governance => "GOVERNANCE",
            RetentionMode::Compliance => "COMPLIANCE",
        }
    }

    /// The mode S3 names `s` (exactly, as AWS accepts it).
    pub fn parse(s: &str) -> Option<RetentionMode> {
        match s {
            "GOVERNANCE" => Some(RetentionMode::Governance),
            "COMPLIANCE" => Some(RetentionMode::Compliance),
            _ => None,
        }
    }
}

/// An object lock's retention: the inode stays unchanged until `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub mode: RetentionMode,
    /// Nanoseconds since the Unix epoch.
    pub until: Nanos,
}

/// The protections an inode carries; the default is none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protection {
    /// `chattr +i`: no change, no new or removed name; root may clear it.
    pub immutable: bool,
    /// `chattr +a`: data only appended; no removed name; root may clear it.
    pub append_only: bool,
    /// S3 legal hold: as immutable until cleared (by a caller allowed to).
    pub legal_hold: bool,
    /// S3 retention: as immutable until it ends (kept after, as S3 shows it).
    pub retention: Option<Retention>,
}

impl Protection {
    /// Carries nothing at all.
    pub fn is_none(&self) -> bool {
        *self == Protection::default()
    }

    /// An object lock holds at `now`: a legal hold or a retention not ended.
    pub fn locked_at(&self, now: Nanos) -> bool {
        self.legal_hold || self.retention.is_some_and(|r| r.until > now)
    }

    /// Nothing about the inode may change at `now`: immutable or locked.
    pub fn frozen_at(&self, now: Nanos) -> bool {
        self.immutable || self.locked_at(now)
    }

    /// No name of the inode may go at `now`: frozen or append-only.
    pub fn pinned_at(&self, now: Nanos) -> bool {
        self.append_only || self.frozen_at(now)
    }

    /// The `FS_IOC_GETFLAGS` bits these protections show.
    pub fn ioctl_flags(&self) -> u32 {
        let mut flags = 0;
        if self.immutable {
            flags |= FS_IMMUTABLE_FL;
        }
        if self.append_only {
            flags |= FS_APPEND_FL;
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_holds_until_its_end_and_a_hold_until_cleared() {
        let retained = Protection {
            retention: Some(Retention {
                mode: RetentionMode::Governance,
                until: 100,
            }),
            ..Protection::default()
        };
        assert!(retained.locked_at(99) && retained.frozen_at(99) && retained.pinned_at(99));
        assert!(!retained.locked_at(100) && !retained.pinned_at(100));
        let held = Protection {
            legal_hold: true,
            ..Protection::default()
        };
        assert!(held.locked_at(i64::MAX));
        let append = Protection {
            append_only: true,
            ..Protection::default()
        };
        assert!(append.pinned_at(0) && !append.frozen_at(0));
        assert_eq!(append.ioctl_flags(), FS_APPEND_FL);
        assert!(Protection::default().is_none());
    }

    #[test]
    fn modes_have_s3_names() {
        for m in [RetentionMode::Governance, RetentionMode::Compliance] {
            assert_eq!(RetentionMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(RetentionMode::parse("governance"), None);
    }
}
