//! Which views of the engine a kept value belongs to, and the rule for answering several
//! kept values together (the read cache's module doc says why).
//!
//! A *view* is one transaction whose engine reads were a single snapshot, or whose reads
//! a commit or a re-check validated at one moment. A value belongs to every view that
//! read it with that same value, as long as it stays kept (any change drops or replaces
//! it): values that share a view were all current at that view's moment.

use std::time::Instant;

/// Views remembered per value: the newest few.
const KEPT: usize = 4;

/// The views a kept value (or page) was seen in with its present value; 0 is no view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Views([u64; KEPT]);

impl Views {
    /// Seen in `view` only (0: in none, it stands alone).
    pub(super) fn one(view: u64) -> Views {
        let mut views = Views::default();
        views.0[0] = view;
        views
    }

    /// Seen again, unchanged, in `view`.
    pub(super) fn add(&mut self, view: u64) {
        if view == 0 || self.0.contains(&view) {
            return;
        }
        self.0.rotate_right(1);
        self.0[0] = view;
    }

    /// The views both were seen in.
    fn common(&self, other: &Views) -> Views {
        let mut both = Views::default();
        for (slot, view) in both.0.iter_mut().zip(self.0) {
            if view != 0 && other.0.contains(&view) {
                *slot = view;
            }
        }
        both
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(|v| *v == 0)
    }
}

/// A kept value (or page) as a transaction saw it: its views, when it was stored, and
/// which store it was (a later store of the key, even of the same value, is another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub(super) views: Views,
    /// When it was stored: after the read that returned it.
    pub(super) at: Instant,
    pub(super) version: u64,
    /// The feed has delivered this client's own announcement of the commit that wrote it:
    /// it was current at that commit's place in the feed's order, and is still kept, so
    /// nothing delivered since changed it.
    pub(super) confirmed: bool,
}

/// Whether kept values seen as `seen`, none dropped since, show one state of the volume:
/// they share a view, or the feed has passed a moment at which each was current — every
/// change committed before it was stored has arrived (`covered_until`), or it is
/// confirmed by its own commit's announcement — and none dropped them, so all of them
/// are current at the feed's present place.
pub(super) fn one_moment(
    seen: impl IntoIterator<Item = Seen>,
    covered_until: Option<Instant>,
) -> bool {
    let mut seen = seen.into_iter();
    let Some(first) = seen.next() else {
        return true;
    };
    let passed = |s: &Seen| s.confirmed || covered_until.is_some_and(|c| s.at <= c);
    let (mut shared, mut all_passed, mut count) = (first.views, passed(&first), 1usize);
    for s in seen {
        shared = shared.common(&s.views);
        all_passed &= passed(&s);
        count += 1;
    }
    count == 1 || !shared.is_empty() || all_passed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(views: &[u64], at: Instant) -> Seen {
        let mut v = Views::default();
        views.iter().rev().for_each(|b| v.add(*b));
        Seen {
            views: v,
            at,
            version: 0,
            confirmed: false,
        }
    }

    #[test]
    fn values_sharing_a_view_or_covered_are_one_moment() {
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_millis(1);
        assert!(one_moment([seen(&[], t0)], None), "one value alone");
        assert!(one_moment([seen(&[1, 2], t0), seen(&[2], t1)], None));
        assert!(!one_moment([seen(&[1], t0), seen(&[2], t1)], None));
        assert!(!one_moment([seen(&[], t0), seen(&[], t0)], None), "no view");
        assert!(!one_moment([seen(&[1], t0), seen(&[2], t1)], Some(t0)));
        assert!(
            one_moment([seen(&[1], t0), seen(&[2], t1)], Some(t1)),
            "covered"
        );
        assert!(!one_moment(
            [seen(&[1, 2], t0), seen(&[2, 3], t0), seen(&[3], t0)],
            None
        ));
    }

    #[test]
    fn only_the_newest_views_are_kept() {
        let mut v = Views::one(1);
        for b in 2..=5 {
            v.add(b);
        }
        v.add(0);
        v.add(5);
        assert_eq!(v.0, [5, 4, 3, 2]);
    }
}
