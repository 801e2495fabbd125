//! What to do with a key, from what each side holds and the flags (`juicefs sync`'s).
//!
//! A file only in the source is copied (not with `--existing`); one on both sides is
//! copied when `--force-update`; with `--update` when the source is newer, or differs in
//! size and is not older; otherwise when the sizes differ, and with `--check-all` also
//! when the contents differ. `--ignore-existing` leaves every key the destination has.
//! A key only in the destination is deleted with `--delete-dst`.

use std::time::Duration;

use crate::endpoint::{Entry, Kind};

/// The flags of one run.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub threads: usize,
    pub update: bool,
    pub force_update: bool,
    pub existing: bool,
    pub ignore_existing: bool,
    /// Make directories (even empty ones) on the destination.
    pub dirs: bool,
    /// Keep mode, owner, group and access control lists.
    pub perms: bool,
    /// Copy symlinks as symlinks (the endpoints were opened so).
    pub links: bool,
    pub delete_src: bool,
    pub delete_dst: bool,
    /// Compare the contents of every new copy with its source.
    pub check_new: bool,
    /// Compare the contents of files the sizes (and times) call equal.
    pub check_all: bool,
    /// Stat each copied file's source again after the copy: one that changed meanwhile
    /// fails (`--check-change`).
    pub check_change: bool,
    pub dry: bool,
    pub min_size: Option<u64>,
    pub max_size: Option<u64>,
    /// Only source files modified at least / at most this long ago.
    pub min_age: Option<Duration>,
    pub max_age: Option<Duration>,
    /// Only source files modified at or after / at or before this time (Unix seconds):
    /// `--start-time`, `--end-time`.
    pub min_mtime: Option<i64>,
    pub max_mtime: Option<i64>,
    /// Bandwidth limit in Mbps (0: none).
    pub bwlimit_mbps: u64,
    /// Stop at the first failed key.
    pub fail_fast: bool,
    /// Stop once more than this many keys failed (`--max-failure`; none: go on).
    pub max_failures: Option<u64>,
    /// Look at no more than this many source keys (`--limit`; none: all).
    pub limit: Option<u64>,
}

/// What is done with one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Copy the source's file (or make its symlink) over whatever the destination has.
    Copy,
    /// Sizes and times agree; with `--check-all`, compare contents and copy if they differ.
    Compare,
    /// Make the directory.
    Mkdir,
    /// Bring mode, owner, group and access control lists of an existing directory in
    /// line (`--perms`).
    SetAttrs,
    /// Delete the destination's key.
    DeleteDst,
    /// Nothing to do (but `--delete-src` may still remove the source's copy).
    Skip,
    /// Left out by a filter on size or age, or by `--existing`.
    Filtered,
    /// The two sides hold different kinds (a file and a directory): reported, not touched.
    Conflict,
}

impl Options {
    /// Whether a source file passes the size and age filters, at `now` (Unix seconds).
    pub fn wants(&self, e: &Entry, now: i64) -> bool {
        if e.kind == Kind::Dir {
            return true;
        }
        let age = Duration::from_secs(u64::try_from(now.saturating_sub(e.mtime)).unwrap_or(0));
        self.min_size.is_none_or(|m| e.size >= m)
            && self.max_size.is_none_or(|m| e.size <= m)
            && self.min_age.is_none_or(|m| age >= m)
            && self.max_age.is_none_or(|m| age <= m)
            && self.min_mtime.is_none_or(|t| e.mtime >= t)
            && self.max_mtime.is_none_or(|t| e.mtime <= t)
    }

    /// Whether a run with `failed` failed keys should stop (`--fail-fast` stops at one).
    pub fn too_many_failures(&self, failed: u64) -> bool {
        let allowed = if self.fail_fast {
            Some(0)
        } else {
            self.max_failures
        };
        allowed.is_some_and(|m| failed > m)
    }

    /// The action for a key held by `src`, `dst` or both; `dst_dirs` says whether the
    /// destination keeps directories of its own.
    pub fn decide(&self, src: Option<&Entry>, dst: Option<&Entry>, dst_dirs: bool) -> Action {
        match (src, dst) {
            (None, None) => Action::Skip,
            (None, Some(_)) if self.delete_dst => Action::DeleteDst,
            (None, Some(_)) => Action::Skip,
            (Some(s), None) => {
                if self.existing {
                    Action::Filtered
                } else if s.kind == Kind::Dir {
                    if self.dirs && dst_dirs {
                        Action::Mkdir
                    } else {
                        Action::Skip
                    }
                } else {
                    Action::Copy
                }
            }
            (Some(s), Some(d)) => self.decide_both(s, d),
        }
    }

    fn decide_both(&self, s: &Entry, d: &Entry) -> Action {
        if (s.kind == Kind::Dir) != (d.kind == Kind::Dir) {
            return Action::Conflict;
        }
        if self.ignore_existing {
            return Action::Skip;
        }
        if s.kind == Kind::Dir {
            let acls_differ = s.acls.is_some() && s.acls != d.acls;
            let differs = s.mode != d.mode || s.uid != d.uid || s.gid != d.gid || acls_differ;
            return if self.perms && self.dirs && differs {
                Action::SetAttrs
            } else {
                Action::Skip
            };
        }
        if self.force_update
            || s.kind != d.kind
            || (s.kind == Kind::Symlink && s.target != d.target)
        {
            return Action::Copy;
        }
        let newer = s.mtime > d.mtime;
        let older = s.mtime < d.mtime;
        let copy = if self.update {
            newer || (s.size != d.size && !older)
        } else {
            s.size != d.size
        };
        if copy {
            Action::Copy
        } else if self.update && older {
            Action::Skip
        } else if self.check_all && s.kind == Kind::File {
            Action::Compare
        } else {
            Action::Skip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(size: u64, mtime: i64) -> Entry {
        Entry::file("k".into(), size, mtime)
    }

    #[test]
    fn the_update_flags_decide_as_documented() {
        let o = Options::default();
        assert_eq!(o.decide(Some(&file(1, 5)), None, false), Action::Copy);
        assert_eq!(
            o.decide(Some(&file(1, 5)), Some(&file(1, 1)), false),
            Action::Skip
        );
        assert_eq!(
            o.decide(Some(&file(2, 5)), Some(&file(1, 9)), false),
            Action::Copy
        );
        assert_eq!(o.decide(None, Some(&file(1, 1)), false), Action::Skip);
        let u = Options {
            update: true,
            ..Options::default()
        };
        assert_eq!(
            u.decide(Some(&file(1, 5)), Some(&file(1, 1)), false),
            Action::Copy
        );
        assert_eq!(
            u.decide(Some(&file(2, 1)), Some(&file(1, 5)), false),
            Action::Skip
        );
        assert_eq!(
            u.decide(Some(&file(2, 5)), Some(&file(1, 5)), false),
            Action::Copy
        );
        let f = Options {
            force_update: true,
            ..Options::default()
        };
        assert_eq!(
            f.decide(Some(&file(1, 1)), Some(&file(1, 1)), false),
            Action::Copy
        );
        let c = Options {
            check_all: true,
            ..Options::default()
        };
        assert_eq!(
            c.decide(Some(&file(1, 1)), Some(&file(1, 1)), false),
            Action::Compare
        );
        let e = Options {
            existing: true,
            ..Options::default()
        };
        assert_eq!(e.decide(Some(&file(1, 1)), None, false), Action::Filtered);
        let i = Options {
            ignore_existing: true,
            ..Options::default()
        };
        assert_eq!(
            i.decide(Some(&file(2, 9)), Some(&file(1, 1)), false),
            Action::Skip
        );
        let d = Options {
            delete_dst: true,
            ..Options::default()
        };
        assert_eq!(d.decide(None, Some(&file(1, 1)), false), Action::DeleteDst);
    }

    #[test]
    fn directories_are_made_only_with_dirs_where_they_exist() {
        let dir = Entry {
            key: "d/".into(),
            kind: Kind::Dir,
            ..file(0, 0)
        };
        let o = Options::default();
        assert_eq!(o.decide(Some(&dir), None, true), Action::Skip);
        let d = Options {
            dirs: true,
            ..Options::default()
        };
        assert_eq!(d.decide(Some(&dir), None, true), Action::Mkdir);
        assert_eq!(d.decide(Some(&dir), None, false), Action::Skip);
        assert_eq!(
            d.decide(Some(&dir), Some(&file(1, 1)), true),
            Action::Conflict
        );
    }

    /// With `--perms`, a directory whose lists differ is brought in line; lists the
    /// source did not read (an object store, or no `--perms`) change nothing.
    #[test]
    fn a_directory_whose_lists_differ_gets_its_attributes_set() {
        use crate::endpoint::Acls;
        let dir = |access: Option<&[u8]>, read: bool| Entry {
            key: "d/".into(),
            kind: Kind::Dir,
            mode: Some(0o755),
            acls: read.then(|| Acls {
                access: access.map(<[u8]>::to_vec),
                default: None,
            }),
            ..file(0, 0)
        };
        let o = Options {
            dirs: true,
            perms: true,
            ..Options::default()
        };
        let (with, without) = (dir(Some(b"list"), true), dir(None, true));
        assert_eq!(
            o.decide(Some(&with), Some(&without), true),
            Action::SetAttrs
        );
        assert_eq!(
            o.decide(Some(&without), Some(&with), true),
            Action::SetAttrs
        );
        assert_eq!(o.decide(Some(&with), Some(&with), true), Action::Skip);
        let unread = dir(None, false);
        assert_eq!(o.decide(Some(&unread), Some(&with), true), Action::Skip);
    }

    #[test]
    fn size_and_age_filters_apply_to_source_files() {
        let o = Options {
            min_size: Some(10),
            max_age: Some(Duration::from_secs(100)),
            ..Options::default()
        };
        assert!(o.wants(&file(10, 950), 1000));
        assert!(!o.wants(&file(9, 950), 1000));
        assert!(!o.wants(&file(10, 850), 1000));
    }

    #[test]
    fn times_and_failure_counts_bound_a_run() {
        let window = Options {
            min_mtime: Some(1_000),
            max_mtime: Some(2_000),
            ..Options::default()
        };
        let now = 10_000;
        let kept: Vec<i64> = [999, 1_000, 1_500, 2_000, 2_001]
            .into_iter()
            .filter(|t| window.wants(&file(1, *t), now))
            .collect();
        assert_eq!(kept, [1_000, 1_500, 2_000]);

        let unlimited = Options::default();
        assert!(!unlimited.too_many_failures(1_000_000));
        let fail_fast = Options {
            fail_fast: true,
            max_failures: Some(10),
            ..Options::default()
        };
        assert!(!fail_fast.too_many_failures(0) && fail_fast.too_many_failures(1));
        let three = Options {
            max_failures: Some(3),
            ..Options::default()
        };
        assert!(!three.too_many_failures(3) && three.too_many_failures(4));
    }
}
