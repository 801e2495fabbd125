use proptest::prelude::*;

use super::*;

/// The kernel's binary form of `entries` (tag, perm, id).
fn xattr(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut out = XATTR_VERSION.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

const U: u32 = UNDEFINED_ID;

/// `user::rw-, user:1000:r-x, group::r--, group:50:rw-, mask::r-x, other::---`.
fn sample() -> Acl {
    Acl {
        owner: 6,
        group: 4,
        mask: Some(5),
        other: 0,
        users: vec![(1000, 5)],
        groups: vec![(50, 6)],
    }
}

struct Who {
    uid: u32,
    groups: Vec<u32>,
}

impl Caller for Who {
    fn uid(&self) -> u32 {
        self.uid
    }
    fn in_group(&self, gid: u32) -> bool {
        self.groups.contains(&gid)
    }
}

fn who(uid: u32, groups: &[u32]) -> Who {
    Who {
        uid,
        groups: groups.to_vec(),
    }
}

#[test]
fn the_binary_form_is_the_kernels() {
    let bytes = xattr(&[
        (TAG_USER_OBJ, 6, U),
        (TAG_USER, 5, 1000),
        (TAG_GROUP_OBJ, 4, U),
        (TAG_GROUP, 6, 50),
        (TAG_MASK, 5, U),
        (TAG_OTHER, 0, U),
    ]);
    assert_eq!(Acl::from_xattr(&bytes), Ok(Some(sample())));
    assert_eq!(sample().to_xattr(), bytes);
    assert_eq!(Acl::from_xattr(&xattr(&[])), Ok(None));
}

#[test]
fn named_entries_are_sorted_and_a_mask_without_names_is_valid() {
    let bytes = xattr(&[
        (TAG_USER_OBJ, 7, U),
        (TAG_USER, 1, 9),
        (TAG_USER, 2, 3),
        (TAG_GROUP_OBJ, 5, U),
        (TAG_MASK, 7, U),
        (TAG_OTHER, 4, U),
    ]);
    let acl = Acl::from_xattr(&bytes).unwrap().unwrap();
    assert_eq!(acl.users, vec![(3, 2), (9, 1)]);
    let masked_only = xattr(&[
        (TAG_USER_OBJ, 7, U),
        (TAG_GROUP_OBJ, 5, U),
        (TAG_MASK, 1, U),
        (TAG_OTHER, 4, U),
    ]);
    let acl = Acl::from_xattr(&masked_only).unwrap().unwrap();
    assert!(!acl.is_minimal());
    assert_eq!(acl.mode_bits(), 0o714);
}

#[test]
fn invalid_lists_are_refused_as_linux_refuses_them() {
    let base = [
        (TAG_USER_OBJ, 6, U),
        (TAG_GROUP_OBJ, 4, U),
        (TAG_OTHER, 0, U),
    ];
    assert_eq!(Acl::from_xattr(b"\x02\x00"), Err(Errno::EINVAL));
    let mut v1 = xattr(&base);
    v1[0] = 1;
    assert_eq!(Acl::from_xattr(&v1), Err(Errno::EOPNOTSUPP));
    let mut ragged = xattr(&base);
    ragged.push(0);
    assert_eq!(Acl::from_xattr(&ragged), Err(Errno::EINVAL));
    let bad: &[&[(u16, u16, u32)]] = &[
        // other before the owning group
        &[
            (TAG_USER_OBJ, 6, U),
            (TAG_OTHER, 0, U),
            (TAG_GROUP_OBJ, 4, U),
        ],
        // no other
        &[(TAG_USER_OBJ, 6, U), (TAG_GROUP_OBJ, 4, U)],
        // the owner twice
        &[
            (TAG_USER_OBJ, 6, U),
            (TAG_USER_OBJ, 6, U),
            (TAG_GROUP_OBJ, 4, U),
            (TAG_OTHER, 0, U),
        ],
        // a named user without a mask
        &[
            (TAG_USER_OBJ, 6, U),
            (TAG_USER, 4, 7),
            (TAG_GROUP_OBJ, 4, U),
            (TAG_OTHER, 0, U),
        ],
        // a named user after the owning group
        &[
            (TAG_USER_OBJ, 6, U),
            (TAG_GROUP_OBJ, 4, U),
            (TAG_USER, 4, 7),
            (TAG_MASK, 4, U),
            (TAG_OTHER, 0, U),
        ],
        // one uid twice
        &[
            (TAG_USER_OBJ, 6, U),
            (TAG_USER, 4, 7),
            (TAG_USER, 2, 7),
            (TAG_GROUP_OBJ, 4, U),
            (TAG_MASK, 4, U),
            (TAG_OTHER, 0, U),
        ],
        // a permission beyond rwx
        &[
            (TAG_USER_OBJ, 8, U),
            (TAG_GROUP_OBJ, 4, U),
            (TAG_OTHER, 0, U),
        ],
        // an unknown tag
        &[
            (TAG_USER_OBJ, 6, U),
            (0x40, 4, U),
            (TAG_GROUP_OBJ, 4, U),
            (TAG_OTHER, 0, U),
        ],
    ];
    for entries in bad {
        assert_eq!(
            Acl::from_xattr(&xattr(entries)),
            Err(Errno::EINVAL),
            "{entries:?}"
        );
    }
}

#[test]
fn access_follows_posix_acl_permission() {
    let acl = sample(); // file owned by 10:20
    let (r, w, x) = (4, 2, 1);
    // The owner entry alone decides for the owner, even when others get more.
    assert!(acl.permits(&who(10, &[50]), 10, 20, r | w));
    assert!(!acl.permits(&who(10, &[50]), 10, 20, x));
    // A named user is masked: r-x & r-x.
    assert!(acl.permits(&who(1000, &[]), 10, 20, r | x));
    assert!(!acl.permits(&who(1000, &[]), 10, 20, w));
    // The named user entry decides even when a group would grant more.
    assert!(!acl.permits(&who(1000, &[50]), 10, 20, w));
    // group:50:rw- masked by r-x gives r only; a matching group that grants too
    // little denies rather than falling through to other.
    assert!(acl.permits(&who(7, &[50]), 10, 20, r));
    assert!(!acl.permits(&who(7, &[50]), 10, 20, w));
    // Any matching group entry that grants suffices.
    assert!(acl.permits(&who(7, &[20, 50]), 10, 20, r));
    // Others get other.
    assert!(!acl.permits(&who(7, &[]), 10, 20, r));
    let open_other = Acl {
        other: 7,
        ..sample()
    };
    assert!(open_other.permits(&who(7, &[]), 10, 20, r | w | x));
    assert!(!open_other.permits(&who(7, &[20]), 10, 20, w));
}

#[test]
fn the_mode_carries_owner_mask_and_other() {
    let acl = sample();
    assert_eq!(acl.mode_bits(), 0o650);
    let chmodded = acl.with_mode(0o4731);
    assert_eq!(
        (chmodded.owner, chmodded.mask, chmodded.other),
        (7, Some(3), 1)
    );
    assert_eq!(chmodded.group, 4, "the owning group's entry stays");
    assert_eq!(chmodded.without_mode(), acl.without_mode());
    assert_eq!(chmodded.without_mode().with_mode(0o731), chmodded);
    let minimal = Acl::from_mode(0o640);
    assert!(minimal.is_minimal());
    assert_eq!(minimal.with_mode(0o755), Acl::from_mode(0o755));
}

#[test]
fn a_new_inode_inherits_the_default_list_cut_to_its_mode() {
    let default = Acl {
        owner: 7,
        group: 5,
        mask: Some(7),
        other: 5,
        users: vec![(1000, 7)],
        groups: Vec::new(),
    };
    let (mode, acl) = default.inherit(0o666);
    assert_eq!(mode, 0o664);
    let acl = acl.unwrap();
    assert_eq!((acl.owner, acl.mask, acl.other), (6, Some(6), 4));
    assert_eq!(
        acl.users,
        vec![(1000, 7)],
        "named entries stay; the mask limits them"
    );
    let plain = Acl::from_mode(0o750);
    assert_eq!(plain.inherit(0o777), (0o750, None));
    assert_eq!(plain.inherit(0o2700), (0o2700, None), "special bits kept");
}

fn arb_acl() -> impl Strategy<Value = Acl> {
    let named = || proptest::collection::btree_map(any::<u32>(), 0u8..8, 0..6);
    (
        0u8..8,
        0u8..8,
        0u8..8,
        0u8..8,
        any::<bool>(),
        named(),
        named(),
    )
        .prop_map(|(owner, group, mask, other, has_mask, users, groups)| {
            let named = !users.is_empty() || !groups.is_empty();
            Acl {
                owner,
                group,
                mask: (has_mask || named).then_some(mask),
                other,
                users: users.into_iter().collect(),
                groups: groups.into_iter().collect(),
            }
        })
}

proptest! {
    #[test]
    fn every_valid_list_round_trips(acl in arb_acl()) {
        prop_assert_eq!(Acl::from_xattr(&acl.to_xattr()), Ok(Some(acl.clone())));
        let mode = acl.mode_bits();
        prop_assert_eq!(acl.without_mode().with_mode(mode), acl);
    }

    #[test]
    fn any_bytes_parse_or_fail_without_panic(body in proptest::collection::vec(any::<u8>(), 0..80)) {
        let mut value = XATTR_VERSION.to_le_bytes().to_vec();
        value.extend_from_slice(&body);
        if let Ok(Some(acl)) = Acl::from_xattr(&value) {
            prop_assert_eq!(Acl::from_xattr(&acl.to_xattr()), Ok(Some(acl)));
        }
    }

    /// Owner, other and the mask (or owning group) live in the mode: whatever the
    /// caller, a list with its mode applied decides as Linux's algorithm over it does.
    #[test]
    fn the_check_never_grants_beyond_the_mask_to_the_group_class(
        acl in arb_acl(), uid in 0u32..4, gids in proptest::collection::vec(0u32..4, 0..3),
        want in 1u8..8,
    ) {
        let caller = Who { uid, groups: gids };
        let granted = acl.permits(&caller, 0, 0, want);
        let class_limit = if uid == 0 { acl.owner } else { acl.mask.unwrap_or(7) };
        let named_or_group = uid != 0 && (acl.users.iter().any(|(u, _)| *u == uid)
            || caller.groups.contains(&0)
            || acl.groups.iter().any(|(g, _)| caller.groups.contains(g)));
        if granted && (uid == 0 || named_or_group) {
            prop_assert_eq!(class_limit & want, want);
        }
        if !named_or_group && uid != 0 {
            prop_assert_eq!(granted, acl.other & want == want);
        }
    }

    /// Mapping named ids renumbers exactly the named entries, and mapping back restores
    /// the list (the same list, in the map's numbering).
    #[test]
    fn named_ids_map_and_map_back(acl in arb_acl(), shift in 1u32..1000) {
        let value = acl.to_xattr();
        let there = map_named_ids(&value, |u| u + shift, |g| g + 2 * shift);
        let mapped = Acl::from_xattr(&there).unwrap().unwrap();
        let users: Vec<_> = acl.users.iter().map(|(u, p)| (u + shift, *p)).collect();
        let groups: Vec<_> = acl.groups.iter().map(|(g, p)| (g + 2 * shift, *p)).collect();
        prop_assert_eq!(&mapped.users, &users);
        prop_assert_eq!(&mapped.groups, &groups);
        prop_assert_eq!((mapped.owner, mapped.group, mapped.mask, mapped.other),
            (acl.owner, acl.group, acl.mask, acl.other));
        let back = map_named_ids(&there, |u| u - shift, |g| g - 2 * shift);
        prop_assert_eq!(back, value);
        prop_assert_eq!(map_named_ids(&[1, 2, 3], |u| u + 1, |g| g), vec![1, 2, 3]);
    }
}
