//! `fsck`'s search for inode records that nothing leads to: no directory entry, no entry
//! in the trash, no session keeping an open file. A volume's transactions never leave
//! one, but a metadata backup taken while clients write can (it is consistent page by
//! page, not as a whole: a file created after its directory's page was read is in the
//! backup without its name), and so can a damaged engine.
//!
//! `fsck` counts first (the inodes its walk reaches against the records its slice scan
//! meets) and calls [`find`] only when they differ. [`find`] walks the namespace again,
//! handing every inode it reaches to an [external sort](super::extsort) (fixed-width hex,
//! so text order is inode order); a scan of the inode key space then yields the inodes
//! that have a record, already in inode order, and the two streams are merged as the scan
//! goes. Memory stays fixed at any volume size. Candidates are checked again at the end (a
//! file may have been created after the walk passed its directory, or deleted since: each
//! directory a candidate records as its parent is read once, `Meta::named_among`), and at
//! most [`NAMED`] are reported one by one.

use strata_meta::{Meta, NamespaceProblem};
use strata_types::{Errno, FileType, Ino};

use super::extsort::{ExternalSorter, SortedLines};
use super::{Result, SCAN_PAGE, SortSpace};

/// Unreferenced inodes checked again and reported by number; the rest are counted.
const NAMED: usize = 1000;

/// The inode records without a name, as namespace problems (none is repaired).
pub(super) async fn find(meta: &Meta, space: &SortSpace) -> Result<Vec<NamespaceProblem>> {
    let mut reached = Reached::new(space)?;
    meta.check_namespace_with(false, |_| {}, |ino| reached.push(ino))
        .await?;
    let mut unreferenced = reached.finish()?;
    let mut cursor = None;
    loop {
        let (page, next) = meta.record_page(&cursor, SCAN_PAGE).await?;
        for ino in page.inodes {
            unreferenced.record(ino)?;
        }
        cursor = next;
        if cursor.is_none() {
            break;
        }
    }
    unreferenced.confirm(meta).await
}

/// The inodes the namespace walk reached, being sorted.
struct Reached {
    sorter: ExternalSorter,
    /// The first spill error; reported when the walk is over.
    error: Option<std::io::Error>,
}

impl Reached {
    fn new(space: &SortSpace) -> Result<Reached> {
        Ok(Reached {
            sorter: space.sorter()?,
            error: None,
        })
    }

    fn push(&mut self, ino: Ino) {
        if self.error.is_none()
            && let Err(e) = self.sorter.push(line_of(ino))
        {
            self.error = Some(e);
        }
    }

    /// The reached inodes in order, ready to be merged with the records.
    fn finish(self) -> Result<Unreferenced> {
        if let Some(e) = self.error {
            return Err(e.into());
        }
        let mut reached = self.sorter.finish()?;
        let next = reached.next_line()?;
        Ok(Unreferenced {
            reached,
            next,
            candidates: Vec::new(),
            unnamed: 0,
        })
    }
}

/// Inode records the walk did not reach, found while the records stream by.
struct Unreferenced {
    reached: SortedLines,
    /// The smallest reached inode not yet passed, as its line.
    next: Option<String>,
    candidates: Vec<Ino>,
    /// Records not reached beyond the [`NAMED`] candidates.
    unnamed: u64,
}

impl Unreferenced {
    /// An inode that has a record; called in inode order.
    fn record(&mut self, ino: Ino) -> Result<()> {
        let line = line_of(ino);
        while self.next.as_deref().is_some_and(|n| n < line.as_str()) {
            self.next = self.reached.next_line()?;
        }
        if self.next.as_deref() != Some(line.as_str()) {
            if self.candidates.len() < NAMED {
                self.candidates.push(ino);
            } else {
                self.unnamed += 1;
            }
        }
        Ok(())
    }

    /// The candidates that still exist and still have no name and no session keeping
    /// them, as namespace problems (not repairable: nothing is deleted), and a summary
    /// line for those past [`NAMED`].
    async fn confirm(self, meta: &Meta) -> Result<Vec<NamespaceProblem>> {
        if self.candidates.is_empty() {
            return Ok(Vec::new());
        }
        let kept = meta.kept_by_sessions().await?;
        let named = meta.named_among(&self.candidates).await?;
        let mut problems = Vec::new();
        for ino in self.candidates {
            if kept.binary_search(&ino).is_ok() || named.contains(&ino) {
                continue; // opened, created or renamed since the walk passed
            }
            let attr = match meta.getattr(ino).await {
                Ok(attr) => attr,
                Err(strata_meta::MetaError::Posix(Errno::ENOENT)) => continue, // deleted
                Err(e) => return Err(e.into()),
            };
            problems.push(NamespaceProblem {
                ino,
                what: format!(
                    "{} of {} bytes with link count {} has no name: no directory, trash \
                     entry or open file refers to it",
                    kind_word(attr.kind),
                    attr.length,
                    attr.nlink
                ),
                repaired: false,
                nameless: true,
            });
        }
        if self.unnamed > 0 {
            problems.push(NamespaceProblem {
                ino: Ino(0),
                what: format!(
                    "{} more inode records have no name (not checked again)",
                    self.unnamed
                ),
                repaired: false,
                nameless: true,
            });
        }
        Ok(problems)
    }
}

fn kind_word(kind: FileType) -> &'static str {
    match kind {
        FileType::Regular => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharDevice => "a character device",
        FileType::BlockDevice => "a block device",
    }
}

/// An inode as a line whose text order is the inodes' order.
fn line_of(ino: Ino) -> String {
    format!("{:016x}", ino.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_sort_as_inode_numbers() {
        let inos = [
            Ino(1),
            Ino(15),
            Ino(16),
            Ino(255),
            Ino(0x7FFF_FFFF_1000_0000),
            Ino(u64::MAX),
        ];
        let lines: Vec<String> = inos.iter().map(|i| line_of(*i)).collect();
        let mut sorted = lines.clone();
        sorted.sort();
        assert_eq!(lines, sorted);
    }

    #[test]
    fn records_not_reached_are_candidates_in_any_number() {
        let dir = tempfile::tempdir().unwrap();
        // A budget this small makes the reached set spill to runs on disk.
        let space = SortSpace {
            dir: dir.path().to_path_buf(),
            budget: 64,
        };
        let mut reached = Reached::new(&space).unwrap();
        for ino in (1..=3000u64).rev().filter(|i| i % 3 != 0) {
            reached.push(Ino(ino));
            reached.push(Ino(ino)); // a hard link: reached once per name
        }
        let mut unreferenced = reached.finish().unwrap();
        for ino in 1..=3001u64 {
            unreferenced.record(Ino(ino)).unwrap();
        }
        // 3, 6, ..., 3000 and 3001 were not reached.
        assert_eq!(unreferenced.unnamed, 1);
        assert_eq!(unreferenced.candidates.len(), NAMED);
        assert_eq!(unreferenced.candidates[0], Ino(3));
        assert_eq!(unreferenced.candidates[NAMED - 1], Ino(3000));
    }
}
