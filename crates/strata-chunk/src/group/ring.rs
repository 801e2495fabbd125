//! Placement of blocks on the members of a cache group: weighted rendezvous hashing. Each
//! member scores every block key (a stable hash of the pair turned into `w / -ln(u)`, with
//! `u` uniform in (0, 1) and `w` the member's weight), and the block belongs to the best
//! score. Adding or removing one member of N therefore moves only the blocks it wins or
//! held — about 1/N of them with equal weights — and a member's share follows its weight.
//! Members passed over (marked down) hand their blocks to the next-best score, so blocks
//! of a dead member spread over the others instead of falling on one.

use std::net::SocketAddr;

/// One member of a cache group as its session advertises it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// Random id chosen by the member at start (stable for its life).
    pub id: u64,
    /// Where it serves peers.
    pub addr: SocketAddr,
    /// Its share of the group's blocks, in MiB of cache (at least 1).
    pub weight_mib: u32,
}

/// The serving members of a group, ordered by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    members: Vec<Member>,
}

impl Ring {
    pub fn new(mut members: Vec<Member>) -> Ring {
        members.sort_by_key(|m| m.id);
        members.dedup_by_key(|m| m.id);
        Ring { members }
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The owner of `key`: the best-scoring member for which `usable` holds.
    pub fn owner(&self, key: &str, usable: impl Fn(&Member) -> bool) -> Option<&Member> {
        let key_hash = fnv1a(key.as_bytes());
        self.members
            .iter()
            .filter(|m| usable(m))
            .map(|m| (score(key_hash, m), m))
            .max_by(|a, b| a.0.total_cmp(&b.0).then(a.1.id.cmp(&b.1.id)))
            .map(|(_, m)| m)
    }
}

/// `w / -ln(u)` for the pair (key, member): the larger, the stronger the claim.
fn score(key_hash: u64, member: &Member) -> f64 {
    let h = mix(key_hash ^ mix(member.id));
    // The top 53 bits as a float in (0, 1): never 0, never 1.
    let top = u32::try_from(h >> 43).unwrap_or(u32::MAX); // 21 bits
    let low = u32::try_from((h >> 11) & 0xffff_ffff).unwrap_or(0); // 32 bits
    let unit = (f64::from(top) * 4_294_967_296.0 + f64::from(low) + 0.5) / 9_007_199_254_740_992.0;
    f64::from(member.weight_mib.max(1)) / -unit.ln()
}

/// FNV-1a, 64 bits: stable across processes and versions (placement must agree on every
/// member), unlike the standard library's seeded hashers.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The splitmix64 finaliser: spreads every input bit over the output.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, weight_mib: u32) -> Member {
        Member {
            id,
            addr: SocketAddr::from(([127, 0, 0, 1], 9000 + u16::try_from(id % 1000).unwrap())),
            weight_mib,
        }
    }

    fn keys(n: usize) -> Vec<String> {
        (0..u64::try_from(n).unwrap())
            .map(|i| crate::block_key(i / 16 + 1, u32::try_from(i % 16).unwrap(), 4 << 20))
            .collect()
    }

    fn owners(ring: &Ring, keys: &[String]) -> Vec<u64> {
        keys.iter()
            .map(|k| ring.owner(k, |_| true).unwrap().id)
            .collect()
    }

    #[test]
    fn a_fourth_member_takes_about_a_quarter() {
        let keys = keys(100_000);
        let three = Ring::new(vec![member(11, 1024), member(22, 1024), member(33, 1024)]);
        let four = Ring::new(vec![
            member(11, 1024),
            member(22, 1024),
            member(33, 1024),
            member(44, 1024),
        ]);
        let (before, after) = (owners(&three, &keys), owners(&four, &keys));
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        let share = moved as f64 / keys.len() as f64;
        assert!((0.20..=0.30).contains(&share), "moved {share}");
        // Every block that moved went to the newcomer: nothing shuffles between old members.
        assert!(before.iter().zip(&after).all(|(a, b)| a == b || *b == 44));
    }

    #[test]
    fn shares_follow_weights() {
        let keys = keys(60_000);
        let ring = Ring::new(vec![member(1, 1000), member(2, 2000), member(3, 3000)]);
        let owned = owners(&ring, &keys);
        for (id, expected) in [(1u64, 1.0 / 6.0), (2, 2.0 / 6.0), (3, 3.0 / 6.0)] {
            let share = owned.iter().filter(|o| **o == id).count() as f64 / keys.len() as f64;
            assert!((share - expected).abs() < 0.02, "member {id}: {share}");
        }
    }

    #[test]
    fn a_passed_over_member_spreads_its_blocks() {
        let keys = keys(30_000);
        let ring = Ring::new(vec![member(1, 64), member(2, 64), member(3, 64)]);
        let all = owners(&ring, &keys);
        let without: Vec<u64> = keys
            .iter()
            .map(|k| ring.owner(k, |m| m.id != 3).unwrap().id)
            .collect();
        let mut to = [0usize; 3];
        for (a, b) in all.iter().zip(&without) {
            assert_ne!(*b, 3);
            if *a != 3 {
                assert_eq!(a, b, "blocks of live members stay put");
            } else {
                to[usize::try_from(*b).unwrap() - 1] += 1;
            }
        }
        assert!(to[0] > to[1] / 2 && to[1] > to[0] / 2, "{to:?}");
        assert!(ring.owner("x", |_| false).is_none());
    }

    #[test]
    fn placement_is_stable_and_order_free() {
        let a = Ring::new(vec![member(5, 10), member(6, 10), member(7, 10)]);
        let b = Ring::new(vec![
            member(7, 10),
            member(5, 10),
            member(6, 10),
            member(6, 10),
        ]);
        assert_eq!(a, b);
        // Fixed values: a change of hash would re-place every cached block in deployed groups.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(mix(0), 0xe220_a839_7b1d_cdaf);
    }
}
