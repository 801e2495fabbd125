//! `--include`/`--exclude` rules, as rsync and `juicefs sync` read them.
//!
//! A pattern is matched against a path (a directory's ends in `/`):
//! - `*` matches any run of characters but `/`, `**` any run including `/`, `?` one
//!   character but `/`, `[a-z]`/`[!a-z]`/`[^a-z]` one of (or none of) a set; `\` quotes;
//! - a pattern ending in `/` matches directories only;
//! - a pattern starting with `/` is anchored at the root of the sync; otherwise one with
//!   a `/` (or `**`) in it matches the end of the path at a name boundary, and one without
//!   matches the last name only.
//!
//! Rules are tried in the order given; the first that matches decides. By default the
//! filter is layered, like rsync: a key is selected when no directory on its way down and
//! not the key itself is excluded, so excluding a directory excludes everything in it.
//! With `--match-full-path` only the whole key is matched, once.

use crate::{Result, SyncError};

/// One rule.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    include: bool,
    /// The pattern without its leading and trailing `/`.
    glob: Vec<u8>,
    anchored: bool,
    dir_only: bool,
    /// Has a `/` or `**`: matched against path endings, not the last name.
    whole_path: bool,
}

/// The rules of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    rules: Vec<Rule>,
    full_path: bool,
}

impl Filter {
    /// Rules from `(include, pattern)` pairs in command-line order.
    pub fn new(rules: &[(bool, String)], full_path: bool) -> Result<Filter> {
        let rules = rules
            .iter()
            .map(|(include, p)| Rule::parse(*include, p))
            .collect::<Result<Vec<_>>>()?;
        Ok(Filter { rules, full_path })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether `key` is selected.
    pub fn selects(&self, key: &str) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        if self.full_path {
            return self.first_match(key) != Some(false);
        }
        let mut at = 0;
        while let Some(i) = key[at..].find('/') {
            let level = &key[..at + i + 1];
            if level.len() == key.len() {
                break;
            }
            if self.first_match(level) == Some(false) {
                return false;
            }
            at += i + 1;
        }
        self.first_match(key) != Some(false)
    }

    /// Whether a walk may skip everything below directory key `dir` (layered rules only:
    /// with full-path matching a key below an excluded directory may still be included).
    pub fn prunes(&self, dir: &str) -> bool {
        !self.full_path && !self.rules.is_empty() && !self.selects(dir)
    }

    fn first_match(&self, path: &str) -> Option<bool> {
        self.rules
            .iter()
            .find(|r| r.matches(path))
            .map(|r| r.include)
    }
}

impl Rule {
    fn parse(include: bool, pattern: &str) -> Result<Rule> {
        let bad = |reason: &str| SyncError::BadPattern {
            pattern: pattern.to_string(),
            reason: reason.to_string(),
        };
        let anchored = pattern.starts_with('/');
        let dir_only = pattern.len() > 1 && pattern.ends_with('/');
        let core = pattern.trim_start_matches('/').trim_end_matches('/');
        if core.is_empty() {
            return Err(bad("empty"));
        }
        check_classes(core.as_bytes()).map_err(bad)?;
        Ok(Rule {
            include,
            glob: core.as_bytes().to_vec(),
            anchored,
            dir_only,
            whole_path: core.contains('/') || core.contains("**"),
        })
    }

    fn matches(&self, path: &str) -> bool {
        let is_dir = path.ends_with('/');
        if self.dir_only && !is_dir {
            return false;
        }
        let p = path.trim_end_matches('/').as_bytes();
        if self.anchored {
            return glob(&self.glob, p);
        }
        if !self.whole_path {
            let last = p.rsplit(|b| *b == b'/').next().unwrap_or(p);
            return glob(&self.glob, last);
        }
        if glob(&self.glob, p) {
            return true;
        }
        p.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .any(|(i, _)| glob(&self.glob, &p[i + 1..]))
    }
}

/// Every `[` has its `]`.
fn check_classes(p: &[u8]) -> std::result::Result<(), &'static str> {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'\\' => i += 2,
            b'[' => match class_end(p, i) {
                Some(end) => i = end + 1,
                None => return Err("a [ without its ]"),
            },
            _ => i += 1,
        }
    }
    Ok(())
}

/// Index of the `]` closing the class that opens at `open`.
fn class_end(p: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if matches!(p.get(i), Some(b'!' | b'^')) {
        i += 1;
    }
    // A `]` first in the class is a member.
    if p.get(i) == Some(&b']') {
        i += 1;
    }
    while i < p.len() {
        if p[i] == b']' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Whether the class at `p[open..=end]` holds `c`.
fn class_has(p: &[u8], open: usize, end: usize, c: u8) -> bool {
    let mut i = open + 1;
    let negated = matches!(p.get(i), Some(b'!' | b'^'));
    if negated {
        i += 1;
    }
    let mut found = false;
    while i < end {
        if i + 2 < end && p[i + 1] == b'-' {
            found |= (p[i]..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            found |= p[i] == c;
            i += 1;
        }
    }
    found != negated
}

/// Whether glob `p` matches all of `s`.
pub fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') if p.get(1) == Some(&b'*') => {
            let rest = &p[2..];
            (0..=s.len()).any(|i| glob(rest, &s[i..]))
        }
        Some(b'*') => {
            let rest = &p[1..];
            let run = s.iter().position(|b| *b == b'/').unwrap_or(s.len());
            (0..=run).any(|i| glob(rest, &s[i..]))
        }
        Some(b'?') => s.first().is_some_and(|c| *c != b'/') && glob(&p[1..], &s[1..]),
        Some(b'[') => match (class_end(p, 0), s.first()) {
            (Some(end), Some(&c)) => {
                c != b'/' && class_has(p, 0, end, c) && glob(&p[end + 1..], &s[1..])
            }
            (None, Some(&c)) => c == b'[' && glob(&p[1..], &s[1..]),
            (_, None) => false,
        },
        Some(b'\\') if p.len() > 1 => s.first() == Some(&p[1]) && glob(&p[2..], &s[1..]),
        Some(&c) => s.first() == Some(&c) && glob(&p[1..], &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(rules: &[(bool, &str)], full: bool) -> Filter {
        let rules: Vec<(bool, String)> = rules.iter().map(|(i, p)| (*i, p.to_string())).collect();
        Filter::new(&rules, full).unwrap()
    }

    fn chosen(f: &Filter, keys: &[&str]) -> Vec<String> {
        keys.iter()
            .filter(|k| f.selects(k))
            .map(|k| k.to_string())
            .collect()
    }

    #[test]
    fn globs_match_as_documented() {
        assert!(glob(b"*.c", b"main.c"));
        assert!(!glob(b"*.c", b"src/main.c"));
        assert!(glob(b"**.c", b"src/main.c"));
        assert!(glob(b"a?", b"a1"));
        assert!(!glob(b"a?", b"a/"));
        assert!(glob(b"a[1-9]", b"a5"));
        assert!(!glob(b"a[!1-9]", b"a5"));
        assert!(glob(b"a[^1-9]", b"ab"));
        assert!(glob(b"\\*", b"*"));
        assert!(!glob(b"\\*", b"x"));
        assert!(glob(b"foo/**/bar", b"foo/x/y/bar"));
    }

    #[test]
    fn examples_from_the_juicefs_documentation_in_full_path_mode() {
        let keys = ["a1/b1", "a2/b2", "aaa/b1", "b1", "b2"];
        assert_eq!(
            chosen(&filter(&[(false, "a?/b*")], true), &keys[..3]),
            ["aaa/b1"]
        );
        let f = filter(&[(true, "a1/b1"), (false, "a[1-9]/b*")], true);
        assert_eq!(chosen(&f, &keys[..3]), ["a1/b1", "aaa/b1"]);
        let f = filter(&[(true, "**.gz"), (false, "*")], true);
        assert_eq!(chosen(&f, &["x.gz", "d/y.gz", "d/z"]), ["x.gz", "d/y.gz"]);
        let f = filter(&[(false, "**/tmpdir/**")], true);
        assert_eq!(
            chosen(&f, &["a/tmpdir/x", "tmpdirx/y", "b"]),
            ["tmpdirx/y", "b"]
        );
    }

    #[test]
    fn layered_rules_exclude_whole_directories_like_rsync() {
        let f = filter(&[(true, "*/"), (true, "*.c"), (false, "*")], false);
        assert_eq!(
            chosen(&f, &["src/", "src/a.c", "src/a.h", "top.c", "README"]),
            ["src/", "src/a.c", "top.c"]
        );
        let f = filter(&[(false, "build/")], false);
        assert_eq!(
            chosen(&f, &["build/x", "build", "src/build/y", "a"]),
            ["build", "a"]
        );
        assert!(f.prunes("src/build/"));
        let f = filter(&[(false, "/build/")], false);
        assert_eq!(chosen(&f, &["build/x", "src/build/y"]), ["src/build/y"]);
    }

    #[test]
    fn a_bad_pattern_is_one_clear_error() {
        let e = Filter::new(&[(true, "a[b".to_string())], false).unwrap_err();
        assert_eq!(e.to_string(), "bad pattern \"a[b\": a [ without its ]");
        assert!(Filter::new(&[(false, "/".to_string())], false).is_err());
    }
}
