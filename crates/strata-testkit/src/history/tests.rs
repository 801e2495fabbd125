#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use proptest::prelude::*;

use super::*;

fn at(dir: u8, name: u8) -> Name {
    Name { dir, name }
}

/// An entry of client `client` over [call, ret] (ms); `ret` None: unknown outcome.
fn e(id: u32, client: u32, op: Op, call: u64, ret: Option<u64>, outcome: Outcome) -> Entry {
    Entry {
        id,
        client,
        op,
        call: call * 1_000_000,
        stale: 0,
        ret: ret.map(|r| r * 1_000_000),
        outcome,
    }
}

/// `entry` allowed to show a state `ms` older than its call.
fn stale(mut entry: Entry, ms: u64) -> Entry {
    entry.stale = ms * 1_000_000;
    entry
}

fn ok(v: Value) -> Outcome {
    Outcome::Ok(v)
}

fn linearizable(entries: Vec<Entry>) -> bool {
    check(&History::from_entries(entries), State::default()).is_ok()
}

#[test]
fn concurrent_creates_of_one_name_have_one_winner() {
    let create = Op::Create { at: at(0, 0) };
    assert!(linearizable(vec![
        e(0, 1, create.clone(), 0, Some(10), ok(Value::Ino(5))),
        e(
            1,
            2,
            create.clone(),
            1,
            Some(9),
            Outcome::Failed(Failure::Exists)
        ),
    ]));
    // Both winning is impossible without an unlink.
    assert!(!linearizable(vec![
        e(0, 1, create.clone(), 0, Some(10), ok(Value::Ino(5))),
        e(1, 2, create.clone(), 1, Some(9), ok(Value::Ino(6))),
    ]));
    // A create that happened must not come back EEXIST to its own client.
    assert!(!linearizable(vec![
        e(
            0,
            1,
            create.clone(),
            0,
            Some(10),
            Outcome::Failed(Failure::Exists)
        ),
        e(
            1,
            2,
            Op::Resolve { at: at(0, 0) },
            11,
            Some(12),
            ok(Value::Ino(5))
        ),
    ]));
}

#[test]
fn reads_must_see_completed_changes_unless_allowed_to_be_stale() {
    let history = |stale_by: u64| {
        vec![
            e(
                0,
                1,
                Op::Create { at: at(0, 1) },
                0,
                Some(10),
                ok(Value::Ino(5)),
            ),
            e(
                1,
                1,
                Op::Unlink { at: at(0, 1) },
                20,
                Some(30),
                ok(Value::None),
            ),
            // Client 2 still sees the name after the unlink returned.
            stale(
                e(
                    2,
                    2,
                    Op::Resolve { at: at(0, 1) },
                    40,
                    Some(41),
                    ok(Value::Ino(5)),
                ),
                stale_by,
            ),
        ]
    };
    assert!(!linearizable(history(0)));
    assert!(linearizable(history(15)));
}

#[test]
fn unknown_outcomes_may_or_may_not_have_happened() {
    let create = Op::Create { at: at(0, 0) };
    let resolve = Op::Resolve { at: at(0, 0) };
    // Happened: seen later under its real number.
    assert!(linearizable(vec![
        e(0, 1, create.clone(), 0, None, Outcome::Unknown),
        e(1, 2, resolve.clone(), 50, Some(51), ok(Value::Ino(9))),
    ]));
    // Did not happen.
    assert!(linearizable(vec![
        e(0, 1, create.clone(), 0, None, Outcome::Unknown),
        e(1, 2, resolve.clone(), 50, Some(51), ok(Value::Absent)),
    ]));
    // Happened late: absent first, then present, with nothing else creating it.
    assert!(linearizable(vec![
        e(0, 1, create.clone(), 0, None, Outcome::Unknown),
        e(1, 2, resolve.clone(), 50, Some(51), ok(Value::Absent)),
        e(2, 2, resolve.clone(), 60, Some(61), ok(Value::Ino(9))),
    ]));
    // But not twice: present, then absent, then present again needs a second create.
    assert!(!linearizable(vec![
        e(0, 1, create.clone(), 0, None, Outcome::Unknown),
        e(1, 2, resolve.clone(), 50, Some(51), ok(Value::Ino(9))),
        e(2, 2, resolve.clone(), 55, Some(56), ok(Value::Absent)),
        e(3, 2, resolve.clone(), 60, Some(61), ok(Value::Ino(9))),
    ]));
}

#[test]
fn link_counts_and_contents_follow_the_operations() {
    let (a, b) = (at(0, 0), at(1, 0));
    let base = vec![
        e(0, 1, Op::Create { at: a }, 0, Some(1), ok(Value::Ino(3))),
        e(
            1,
            1,
            Op::Link { ino: 3, to: b },
            2,
            Some(3),
            ok(Value::None),
        ),
        e(
            2,
            1,
            Op::Write {
                ino: 3,
                content: 77,
            },
            4,
            Some(5),
            ok(Value::None),
        ),
        e(
            3,
            1,
            Op::Rename { from: b, to: a },
            6,
            Some(7),
            ok(Value::None),
        ),
    ];
    let stat = |nlink, empty| {
        let mut h = base.clone();
        h.push(e(
            4,
            2,
            Op::Stat { at: b },
            8,
            Some(9),
            ok(Value::Attr {
                ino: 3,
                mode: model::NEW_MODE,
                nlink,
                empty,
            }),
        ));
        h
    };
    // rename between two links of one inode changes nothing: both names stay.
    assert!(linearizable(stat(2, Some(false))));
    assert!(linearizable(stat(2, None)));
    assert!(!linearizable(stat(3, Some(false))), "a link applied twice");
    assert!(!linearizable(stat(2, Some(true))), "the write vanished");
}

#[test]
fn a_handle_may_find_its_inode_gone_only_once_it_has_no_name() {
    let a = at(0, 0);
    let h = |unlinked: bool| {
        let mut h = vec![e(0, 1, Op::Create { at: a }, 0, Some(1), ok(Value::Ino(3)))];
        if unlinked {
            h.push(e(1, 2, Op::Unlink { at: a }, 2, Some(3), ok(Value::None)));
        }
        h.push(e(
            2,
            1,
            Op::Write { ino: 3, content: 5 },
            4,
            Some(5),
            Outcome::Failed(Failure::NotFound),
        ));
        h.push(e(
            3,
            1,
            Op::Read { ino: 3 },
            6,
            Some(7),
            Outcome::Failed(Failure::NotFound),
        ));
        h
    };
    assert!(linearizable(h(true)));
    assert!(!linearizable(h(false)), "a named file's handle must work");
}

#[test]
fn listings_show_a_state_that_existed() {
    let h = |names: Vec<u8>| {
        vec![
            e(
                0,
                1,
                Op::Create { at: at(0, 0) },
                0,
                Some(1),
                ok(Value::Ino(3)),
            ),
            e(
                1,
                1,
                Op::Rename {
                    from: at(0, 0),
                    to: at(0, 2),
                },
                2,
                Some(3),
                ok(Value::None),
            ),
            e(
                2,
                2,
                Op::List { dir: 0 },
                1,
                Some(4),
                ok(Value::Names(names)),
            ),
        ]
    };
    assert!(linearizable(h(vec![0])));
    assert!(linearizable(h(vec![2])));
    assert!(linearizable(h(vec![])));
    assert!(
        !linearizable(h(vec![0, 2])),
        "both names at once never existed"
    );
}

/// A random operation on a namespace of 2 directories of 3 names, for inodes in `inos`.
fn random_op(r: &mut impl FnMut(u64) -> u64, inos: &[u64], content: u64) -> Op {
    fn name(r: &mut impl FnMut(u64) -> u64) -> Name {
        at(u8::try_from(r(2)).unwrap(), u8::try_from(r(3)).unwrap())
    }
    fn pick(r: &mut impl FnMut(u64) -> u64, inos: &[u64]) -> u64 {
        inos[usize::try_from(r(inos.len() as u64)).unwrap()]
    }
    match (r(10), inos.is_empty()) {
        (0 | 1, _) | (_, true) => Op::Create { at: name(r) },
        (2, _) => Op::Resolve { at: name(r) },
        (3, _) => Op::Stat { at: name(r) },
        (4, _) => Op::Write {
            ino: pick(r, inos),
            content,
        },
        (5, _) => Op::Read { ino: pick(r, inos) },
        (6, _) => Op::Rename {
            from: name(r),
            to: name(r),
        },
        (7, _) => Op::Link {
            ino: pick(r, inos),
            to: name(r),
        },
        (8, _) => Op::Unlink { at: name(r) },
        _ => Op::List {
            dir: u8::try_from(r(2)).unwrap(),
        },
    }
}

/// Run `n` random operations on the model as the truth, one every 10 ms, by 3 clients in
/// turn; each gets a window around its instant of up to `spread` ms each side (below 15,
/// so one client's operations never overlap), and with `unknown` in 100 a change is
/// recorded as unknown (and happened or not, at random), its window closed `closed` ms
/// after its call (None: open forever).
fn generate(seed: u64, n: usize, spread: u64, unknown: u64) -> Vec<Entry> {
    generate_closed(seed, n, spread, unknown, None)
}

fn generate_closed(
    seed: u64,
    n: usize,
    spread: u64,
    unknown: u64,
    closed: Option<u64>,
) -> Vec<Entry> {
    generate_stale(seed, n, spread, unknown, closed, 0)
}

/// [`generate_closed`] with the calls of lookups and stats moved back by `stale` ms (as
/// a client's metadata cache records them).
fn generate_stale(
    seed: u64,
    n: usize,
    spread: u64,
    unknown: u64,
    closed: Option<u64>,
    stale: u64,
) -> Vec<Entry> {
    let mut x = seed | 1;
    let mut r = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m.max(1)
    };
    let mut truth = State::default();
    let mut next_ino = 100;
    let mut out = Vec::new();
    // Clients can only name inodes some answer showed them.
    let mut observed: Vec<u64> = Vec::new();
    for k in 0..n {
        let inos: Vec<u64> = observed
            .iter()
            .copied()
            .filter(|i| truth.files.contains_key(&InoKey::Real(*i)))
            .collect();
        let op = random_op(&mut r, &inos, 1000 + k as u64);
        let (next, result) = truth.run(&op, next_ino).unwrap();
        let lost = !op.reads_only() && r(100) < unknown;
        let happened = !lost || r(2) == 0;
        if happened {
            if matches!(result, Outcome::Ok(Value::Ino(_))) && matches!(op, Op::Create { .. }) {
                next_ino += 1;
            }
            truth = next;
        }
        if !lost {
            match &result {
                Outcome::Ok(Value::Ino(i)) | Outcome::Ok(Value::Attr { ino: i, .. }) => {
                    observed.push(*i)
                }
                _ => {}
            }
        }
        let t = 10 * k as u64 + 20;
        let allowance = if matches!(op, Op::Resolve { .. } | Op::Stat { .. }) {
            stale
        } else {
            0
        };
        // A stale read starts up to its allowance after the instant whose state it shows.
        let call = if allowance > 0 {
            t + r(allowance + 1)
        } else {
            t - r(spread + 1)
        };
        let ret = call.max(t) + r(spread + 1);
        let entry = e(
            k as u32,
            (k % 3) as u32,
            op,
            call,
            if lost {
                closed.map(|c| call + c)
            } else {
                Some(ret)
            },
            if lost { Outcome::Unknown } else { result },
        );
        out.push(self::stale(entry, allowance));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn histories_of_a_real_execution_pass(seed in any::<u64>(), spread in 0u64..15, unknown in 0u64..20) {
        let h = generate(seed, 60, spread, unknown);
        let checked = check(&History::from_entries(h.clone()), State::default());
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
    }

    #[test]
    fn a_changed_read_in_a_sequential_history_fails(seed in any::<u64>(), pick in any::<prop::sample::Index>()) {
        let mut h = generate(seed, 40, 0, 0);
        let reads: Vec<usize> = (0..h.len()).filter(|i| h[*i].op.reads_only()).collect();
        prop_assume!(!reads.is_empty());
        let i = reads[pick.index(reads.len())];
        h[i].outcome = match &h[i].outcome {
            Outcome::Ok(Value::Absent) => ok(Value::Ino(999_999)),
            Outcome::Ok(Value::Ino(n)) => ok(Value::Ino(n + 1)),
            Outcome::Ok(Value::Attr { ino, mode, nlink, empty }) =>
                ok(Value::Attr { ino: *ino, mode: *mode, nlink: nlink + 1, empty: *empty }),
            Outcome::Ok(Value::Content(c)) => ok(Value::Content(c + 1)),
            Outcome::Ok(Value::Names(names)) => {
                let mut names = names.clone();
                if names.contains(&2) { names.retain(|n| *n != 2) } else { names.push(2); names.sort() }
                ok(Value::Names(names))
            }
            other => panic!("a read returned {other:?}"),
        };
        prop_assert!(check(&History::from_entries(h), State::default()).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn histories_with_closed_unknown_windows_pass(seed in any::<u64>(), unknown in 0u64..30) {
        let h = generate_closed(seed, 120, 14, unknown, Some(25));
        let checked = check(&History::from_entries(h), State::default());
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn histories_with_stale_reads_pass(seed in any::<u64>(), stale in 0u64..400, unknown in 0u64..10) {
        let h = generate_stale(seed, 150, 14, unknown, Some(30), stale);
        let checked = check_within(&History::from_entries(h), State::default(), 5_000_000);
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
    }
}

#[test]
fn a_dropped_unknown_cannot_happen_after_its_window() {
    let create = Op::Create { at: at(0, 0) };
    let resolve = Op::Resolve { at: at(0, 0) };
    // Closed at 20 ms: absent at 30 ms means it did not happen; present at 40 is a lie.
    assert!(!linearizable(vec![
        e(0, 1, create.clone(), 0, Some(20), Outcome::Unknown),
        e(1, 2, resolve.clone(), 30, Some(31), ok(Value::Absent)),
        e(2, 2, resolve.clone(), 40, Some(41), ok(Value::Ino(9))),
    ]));
    assert!(linearizable(vec![
        e(0, 1, create.clone(), 0, Some(20), Outcome::Unknown),
        e(1, 2, resolve.clone(), 30, Some(31), ok(Value::Ino(9))),
    ]));
}

#[test]
fn a_long_concurrent_history_checks_quickly() {
    let h = generate_closed(7, 3000, 14, 5, Some(40));
    let started = std::time::Instant::now();
    let stats = check(&History::from_entries(h), State::default()).unwrap();
    assert_eq!(
        stats.operations,
        3000 - stats.operations.saturating_sub(3000)
    );
    assert!(stats.unknown > 50, "{stats:?}");
    // Not a benchmark: a bound that a quadratic blow-up would break.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}
