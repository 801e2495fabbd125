//! Who a front end's caller is in the volume: squashing root or every user to one
//! identity, and maps between a host's numbering of users and groups and the volume's
//! (`--root-squash`, `--all-squash`, `--uid-map`, `--gid-map`, `--umask` on the mount,
//! the gateway, WebDAV and the SDK; docs/SEMANTICS.md "Identity mapping").
//!
//! A request's identity is mapped host → volume before any check ([`Identity::caller`]);
//! owners a caller names (`chown`) are mapped the same way ([`Identity::to_volume`]);
//! owners shown to the caller are mapped back ([`Identity::shown_owner`]) by the uid and gid
//! maps only — a squashed caller sees the volume's owners as they are, as NFS shows them.
//! Named entries of access control lists are mapped the same way both ways
//! ([`Identity::acl_to_volume`], [`Identity::acl_to_host`]).

use std::collections::HashMap;

use crate::Ctx;

/// A bad identity option, naming the option and what was wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{option} {value:?}: {why}")]
pub struct IdentityError {
    option: &'static str,
    value: String,
    why: &'static str,
}

/// One numbering mapped to another and back (host ids → volume ids).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct IdMap {
    to_volume: HashMap<u32, u32>,
    to_host: HashMap<u32, u32>,
}

impl IdMap {
    /// `HOST:VOLUME[,HOST:VOLUME...]`; each id at most once on each side.
    fn parse(option: &'static str, value: &str) -> Result<IdMap, IdentityError> {
        let bad = |why| IdentityError {
            option,
            value: value.to_string(),
            why,
        };
        let mut map = IdMap::default();
        for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
            let (host, volume) =
                parse_pair(pair).ok_or_else(|| bad("expected HOST:VOLUME[,...]"))?;
            if map.to_volume.insert(host, volume).is_some() {
                return Err(bad("a host id is mapped twice"));
            }
            if map.to_host.insert(volume, host).is_some() {
                return Err(bad("a volume id is mapped twice"));
            }
        }
        Ok(map)
    }

    fn to_volume(&self, id: u32) -> u32 {
        self.to_volume.get(&id).copied().unwrap_or(id)
    }

    fn to_host(&self, id: u32) -> u32 {
        self.to_host.get(&id).copied().unwrap_or(id)
    }
}

/// `A:B` as two ids.
fn parse_pair(pair: &str) -> Option<(u32, u32)> {
    let (a, b) = pair.trim().split_once(':')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// How a front end's callers map to the volume's users and groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// Root (uid 0) acts as this uid and gid.
    root_squash: Option<(u32, u32)>,
    /// Everyone acts as this uid and gid.
    all_squash: Option<(u32, u32)>,
    uids: IdMap,
    gids: IdMap,
    /// Bits every new file and directory is created without, beside the caller's umask.
    umask: u16,
}

/// The identity options as given on a command line (each `None` when not given).
#[derive(Clone, Debug, Default)]
pub struct IdentityOptions<'a> {
    pub root_squash: Option<&'a str>,
    pub all_squash: Option<&'a str>,
    pub uid_map: Option<&'a str>,
    pub gid_map: Option<&'a str>,
    pub umask: Option<&'a str>,
}

impl Identity {
    /// Parse the options; an empty set maps nothing.
    pub fn parse(opts: &IdentityOptions<'_>) -> Result<Identity, IdentityError> {
        let squash = |option, value: Option<&str>| {
            value
                .map(|v| {
                    parse_pair(v).ok_or_else(|| IdentityError {
                        option,
                        value: v.to_string(),
                        why: "expected UID:GID",
                    })
                })
                .transpose()
        };
        let umask = match opts.umask {
            None => 0,
            Some(v) => u16::from_str_radix(v.trim(), 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .ok_or_else(|| IdentityError {
                    option: "--umask",
                    value: v.to_string(),
                    why: "expected octal bits up to 777, like 022",
                })?,
        };
        Ok(Identity {
            root_squash: squash("--root-squash", opts.root_squash)?,
            all_squash: squash("--all-squash", opts.all_squash)?,
            uids: opts
                .uid_map
                .map(|v| IdMap::parse("--uid-map", v))
                .transpose()?
                .unwrap_or_default(),
            gids: opts
                .gid_map
                .map(|v| IdMap::parse("--gid-map", v))
                .transpose()?
                .unwrap_or_default(),
            umask,
        })
    }

    /// True when callers act as someone else than they are (squash or maps): the
    /// kernel's own permission checks, made with the host's ids, would then be wrong.
    pub fn maps_callers(&self) -> bool {
        self.root_squash.is_some()
            || self.all_squash.is_some()
            || !self.uids.to_volume.is_empty()
            || !self.gids.to_volume.is_empty()
    }

    /// The volume identity a host caller acts as.
    pub fn caller(&self, mut ctx: Ctx) -> Ctx {
        ctx.umask |= self.umask;
        if self.squash(&mut ctx) {
            return ctx;
        }
        ctx.uid = self.uids.to_volume(ctx.uid);
        ctx.gid = self.gids.to_volume(ctx.gid);
        for group in &mut ctx.groups {
            *group = self.gids.to_volume(*group);
        }
        ctx
    }

    /// The identity of a gateway or WebDAV user kept with volume ids (`strata gateway user
    /// add --uid`): squashed and given the umask as any caller, but not mapped, since its
    /// ids are the volume's already.
    pub fn volume_user(&self, uid: u32, gid: u32, groups: &[u32]) -> Ctx {
        let mut ctx = Ctx::user(uid, gid);
        ctx.groups = groups.to_vec();
        ctx.umask = self.umask;
        self.squash(&mut ctx);
        ctx
    }

    /// Squash `ctx` where `--all-squash` or (for root) `--root-squash` says so, its
    /// supplementary groups dropped; true when it was.
    fn squash(&self, ctx: &mut Ctx) -> bool {
        let squash = self
            .all_squash
            .or(self.root_squash.filter(|_| ctx.uid == 0));
        let Some((uid, gid)) = squash else {
            return false;
        };
        ctx.uid = uid;
        ctx.gid = gid;
        ctx.groups.clear();
        true
    }

    /// An owner a caller names (`chown`), in the volume's numbering.
    pub fn to_volume(&self, uid: Option<u32>, gid: Option<u32>) -> (Option<u32>, Option<u32>) {
        (
            uid.map(|u| self.uids.to_volume(u)),
            gid.map(|g| self.gids.to_volume(g)),
        )
    }

    /// An owner as the caller's host numbers it.
    pub fn shown_owner(&self, uid: u32, gid: u32) -> (u32, u32) {
        (self.uids.to_host(uid), self.gids.to_host(gid))
    }

    /// An access control list a caller sets (`setfacl`, binary form): its named users and
    /// groups in the volume's numbering, as `chown` maps owners. Squashing leaves them.
    pub fn acl_to_volume(&self, value: &[u8]) -> Vec<u8> {
        strata_meta::acl::map_named_ids(
            value,
            |u| self.uids.to_volume(u),
            |g| self.gids.to_volume(g),
        )
    }

    /// A list shown to the caller (`getfacl`): named entries in the host's numbering.
    pub fn acl_to_host(&self, value: &[u8]) -> Vec<u8> {
        strata_meta::acl::map_named_ids(value, |u| self.uids.to_host(u), |g| self.gids.to_host(g))
    }

    /// True when the uid or gid map renumbers anyone.
    pub fn maps_ids(&self) -> bool {
        !self.uids.to_volume.is_empty() || !self.gids.to_volume.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Ctx {
        Ctx {
            groups: groups.to_vec(),
            umask: 0o002,
            ..Ctx::user(uid, gid)
        }
    }

    fn parse(opts: IdentityOptions<'_>) -> Identity {
        Identity::parse(&opts).unwrap()
    }

    #[test]
    fn nothing_given_maps_nothing() {
        let id = parse(IdentityOptions::default());
        assert!(!id.maps_callers());
        assert_eq!(id.caller(user(5, 6, &[7])), user(5, 6, &[7]));
        assert_eq!(id.caller(Ctx::root()), Ctx::root());
    }

    #[test]
    fn root_squash_maps_only_root() {
        let id = parse(IdentityOptions {
            root_squash: Some("65534:65533"),
            ..Default::default()
        });
        assert!(id.maps_callers());
        let root = Ctx {
            groups: vec![0, 4],
            ..Ctx::root()
        };
        let squashed = id.caller(root);
        assert_eq!((squashed.uid, squashed.gid), (65534, 65533));
        assert!(squashed.groups.is_empty(), "root's groups go too");
        assert_eq!(id.caller(user(1000, 1000, &[27])), user(1000, 1000, &[27]));
    }

    #[test]
    fn all_squash_maps_everyone_and_wins_over_maps() {
        let id = parse(IdentityOptions {
            all_squash: Some("1500:1600"),
            root_squash: Some("1:1"),
            uid_map: Some("1000:2000"),
            ..Default::default()
        });
        for ctx in [Ctx::root(), user(1000, 1000, &[27])] {
            let c = id.caller(ctx);
            assert_eq!((c.uid, c.gid, c.groups.len()), (1500, 1600, 0));
        }
    }

    #[test]
    fn maps_go_both_ways_and_leave_other_ids_alone() {
        let id = parse(IdentityOptions {
            uid_map: Some("1000:2000, 1001:2001"),
            gid_map: Some("100:300"),
            ..Default::default()
        });
        let c = id.caller(user(1000, 100, &[100, 5]));
        assert_eq!((c.uid, c.gid, c.groups), (2000, 300, vec![300, 5]));
        assert_eq!(id.caller(user(7, 8, &[])), user(7, 8, &[]));
        assert_eq!(id.to_volume(Some(1001), Some(100)), (Some(2001), Some(300)));
        assert_eq!(id.to_volume(None, Some(9)), (None, Some(9)));
        assert_eq!(id.shown_owner(2000, 300), (1000, 100));
        assert_eq!(id.shown_owner(3, 4), (3, 4));
    }

    #[test]
    fn named_entries_of_lists_are_mapped_both_ways() {
        let id = parse(IdentityOptions {
            uid_map: Some("1000:2000"),
            gid_map: Some("100:300"),
            root_squash: Some("9:9"),
            ..Default::default()
        });
        assert!(id.maps_ids());
        let acl = |user: u32, group: u32| {
            strata_meta::acl::Acl {
                owner: 6,
                group: 4,
                mask: Some(6),
                other: 0,
                users: vec![(user, 6)],
                groups: vec![(group, 4)],
            }
            .to_xattr()
        };
        assert_eq!(id.acl_to_volume(&acl(1000, 100)), acl(2000, 300));
        assert_eq!(id.acl_to_host(&acl(2000, 300)), acl(1000, 100));
        assert_eq!(id.acl_to_volume(&acl(7, 8)), acl(7, 8), "unmapped ids stay");
        assert!(!parse(IdentityOptions::default()).maps_ids());
    }

    #[test]
    fn volume_users_are_squashed_but_not_mapped() {
        let id = parse(IdentityOptions {
            root_squash: Some("65534:65534"),
            uid_map: Some("1000:2000"),
            umask: Some("027"),
            ..Default::default()
        });
        let u = id.volume_user(1000, 50, &[60, 70]);
        assert_eq!(
            (u.uid, u.gid, u.groups, u.umask),
            (1000, 50, vec![60, 70], 0o027)
        );
        let r = id.volume_user(0, 0, &[1]);
        assert_eq!((r.uid, r.gid, r.groups.len()), (65534, 65534, 0));
        let all = parse(IdentityOptions {
            all_squash: Some("9:9"),
            ..Default::default()
        });
        let a = all.volume_user(1000, 50, &[60]);
        assert_eq!((a.uid, a.gid, a.groups.len()), (9, 9, 0));
    }

    #[test]
    fn umask_adds_to_the_callers() {
        let id = parse(IdentityOptions {
            umask: Some("027"),
            ..Default::default()
        });
        assert_eq!(id.caller(user(1, 1, &[])).umask, 0o027);
        assert!(!id.maps_callers());
    }

    #[test]
    fn bad_values_name_the_option() {
        for (opts, option) in [
            (
                IdentityOptions {
                    root_squash: Some("65534"),
                    ..Default::default()
                },
                "--root-squash",
            ),
            (
                IdentityOptions {
                    all_squash: Some("a:b"),
                    ..Default::default()
                },
                "--all-squash",
            ),
            (
                IdentityOptions {
                    uid_map: Some("1:2,1:3"),
                    ..Default::default()
                },
                "--uid-map",
            ),
            (
                IdentityOptions {
                    gid_map: Some("1:2,3:2"),
                    ..Default::default()
                },
                "--gid-map",
            ),
            (
                IdentityOptions {
                    umask: Some("0999"),
                    ..Default::default()
                },
                "--umask",
            ),
        ] {
            let err = Identity::parse(&opts).unwrap_err().to_string();
            assert!(err.starts_with(option), "{err}");
        }
    }
}
