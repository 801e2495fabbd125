//! The generator's own cases: layouts, lengths, and the lines' structure.

use super::*;

fn spec(files: u64, shape: PopulateShape, per_dir: u64) -> PopulateSpec {
    PopulateSpec {
        files,
        shape,
        per_dir,
        size_min: 0,
        size_max: 0,
        seed: 1,
    }
}

fn format() -> Format {
    crate::conformance::test_format(1)
}

fn lines(spec: PopulateSpec) -> Vec<DumpLine> {
    Population::new(spec, &format(), 0)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap()
}

#[test]
fn layouts_hold_every_file_within_the_bounds() {
    let flat = spec(5, PopulateShape::Flat, 2).layout().unwrap();
    assert_eq!((flat.leaves, flat.levels, flat.dirs), (1, 0, 1));
    let wide = spec(2_500, PopulateShape::Wide, 1000).layout().unwrap();
    assert_eq!(
        (wide.leaves, wide.levels, wide.fanout, wide.dirs),
        (3, 1, 1000, 4)
    );
    let big = spec(2_000_000, PopulateShape::Wide, 1000).layout().unwrap();
    assert_eq!((big.leaves, big.levels, big.dirs), (2000, 2, 1 + 2 + 2000));
    let deep = spec(100, PopulateShape::Deep { depth: 3 }, 10)
        .layout()
        .unwrap();
    // 10 leaves need a fanout of 3 over three levels (2^3 = 8 is too few).
    assert_eq!((deep.leaves, deep.levels, deep.fanout), (10, 3, 3));
    assert_eq!(deep.dirs, 1 + 2 + 4 + 10);
    assert!(spec(1, PopulateShape::Wide, 0).layout().is_err());
    assert!(
        spec(1, PopulateShape::Deep { depth: 0 }, 1)
            .layout()
            .is_err()
    );
}

#[test]
fn lines_are_a_whole_dump_with_each_directory_after_its_children() {
    let all = lines(spec(25, PopulateShape::Wide, 10));
    assert!(matches!(all.first(), Some(DumpLine::Header { .. })));
    let Some(DumpLine::End { nodes, entries }) = all.last() else {
        panic!("no end line")
    };
    // 25 files, the top directory and 3 leaves; nodes add the root and the trash.
    assert_eq!((*nodes, *entries), (25 + 4 + 2, 25 + 4));
    let mut written = std::collections::HashSet::new();
    for line in &all {
        if let DumpLine::Node(node) = line {
            if let Some([_, inodes]) = node.usage {
                let children = all
                    .iter()
                    .filter(|l| matches!(l, DumpLine::Entry { parent, .. } if *parent == node.ino))
                    .count();
                assert_eq!(usize::try_from(inodes).unwrap(), children, "{node:?}");
            }
            written.insert(node.ino);
        }
        if let DumpLine::Entry { parent, .. } = line {
            assert!(
                !written.contains(parent),
                "an entry after its directory's record"
            );
        }
    }
    let names: Vec<String> = all
        .iter()
        .filter_map(|l| match l {
            DumpLine::Entry {
                name: Raw::Text(n), ..
            } => Some(n.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(&names[..4], ["wide", "d0", "f00", "f01"]);
    assert!(names.contains(&"d2".to_string()) && names.contains(&"f24".to_string()));
}

#[test]
fn lengths_are_within_the_bounds_and_the_seed_decides_them() {
    let sized = |seed| PopulateSpec {
        size_min: 100,
        size_max: 10 << 20,
        seed,
        ..spec(2000, PopulateShape::Flat, 1)
    };
    let lengths = |s: PopulateSpec| -> Vec<u64> { (0..2000).map(|i| s.size_of(i)).collect() };
    let a = lengths(sized(1));
    assert!(a.iter().all(|l| (100..=10 << 20).contains(l)));
    assert_eq!(a, lengths(sized(1)), "same seed, same lengths");
    assert_ne!(a, lengths(sized(2)));
    // Log-uniform: about as many below 10 KiB as above 1 MiB (each ~two of ~17 bands).
    let small = a.iter().filter(|l| **l < 10 << 10).count();
    let large = a.iter().filter(|l| **l >= 1 << 20).count();
    assert!(small > 200 && large > 200, "{small} small, {large} large");
    assert_eq!(spec(3, PopulateShape::Flat, 1).size_of(2), 0);
}
