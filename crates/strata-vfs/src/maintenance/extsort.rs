//! External sort of text lines under a fixed memory budget: lines are collected into runs
//! of at most `budget` bytes, each run is sorted and spilled to a file, and the runs are
//! merged back as one ascending stream. gc and fsck compare their sorted streams (object
//! listing against metadata references) this way, so their memory does not grow with the
//! number of objects.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

/// Collects lines (without `\n`) and hands them back sorted.
#[derive(Debug)]
pub struct ExternalSorter {
    dir: tempfile::TempDir,
    run: Vec<String>,
    run_bytes: usize,
    budget: usize,
    runs: Vec<File>,
    lines: u64,
}

impl ExternalSorter {
    /// Spill runs into a fresh directory under `parent`; keep at most `budget` bytes of
    /// lines in memory.
    pub fn new(parent: &Path, budget: usize) -> io::Result<ExternalSorter> {
        std::fs::create_dir_all(parent)?;
        Ok(ExternalSorter {
            dir: tempfile::Builder::new()
                .prefix("strata-sort-")
                .tempdir_in(parent)?,
            run: Vec::new(),
            run_bytes: 0,
            budget: budget.max(1024),
            runs: Vec::new(),
            lines: 0,
        })
    }

    /// Add one line (it must not contain `\n`).
    pub fn push(&mut self, line: String) -> io::Result<()> {
        // A String costs its bytes plus its 24-byte header in the run.
        self.run_bytes += line.len() + 24;
        self.run.push(line);
        self.lines += 1;
        if self.run_bytes >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Lines pushed so far.
    pub fn len(&self) -> u64 {
        self.lines
    }

    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// Runs written to disk so far.
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.run.is_empty() {
            return Ok(());
        }
        self.run.sort_unstable();
        let path = self.dir.path().join(format!("run-{}", self.runs.len()));
        let mut out = BufWriter::new(File::create(&path)?);
        for line in self.run.drain(..) {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        drop(out);
        self.runs.push(File::open(&path)?);
        self.run_bytes = 0;
        self.run = Vec::new();
        Ok(())
    }

    /// All lines in ascending byte order (duplicates kept).
    pub fn finish(mut self) -> io::Result<SortedLines> {
        let in_memory = if self.runs.is_empty() {
            self.run.sort_unstable();
            std::mem::take(&mut self.run)
        } else {
            self.spill()?;
            Vec::new()
        };
        let mut merged = SortedLines {
            _dir: self.dir,
            readers: Vec::new(),
            heap: BinaryHeap::new(),
            memory: in_memory.into_iter(),
        };
        for run in std::mem::take(&mut self.runs) {
            let index = merged.readers.len();
            merged
                .readers
                .push(BufReader::with_capacity(64 * 1024, run));
            merged.refill(index)?;
        }
        Ok(merged)
    }
}

/// The merged, ascending stream of an [`ExternalSorter`]'s lines.
#[derive(Debug)]
pub struct SortedLines {
    _dir: tempfile::TempDir,
    readers: Vec<BufReader<File>>,
    heap: BinaryHeap<Reverse<(String, usize)>>,
    memory: std::vec::IntoIter<String>,
}

impl SortedLines {
    fn refill(&mut self, index: usize) -> io::Result<()> {
        let mut line = String::new();
        if self.readers[index].read_line(&mut line)? > 0 {
            if line.ends_with('\n') {
                line.pop();
            }
            self.heap.push(Reverse((line, index)));
        }
        Ok(())
    }

    /// The next line, or `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<String>> {
        if self.readers.is_empty() {
            return Ok(self.memory.next());
        }
        match self.heap.pop() {
            Some(Reverse((line, index))) => {
                self.refill(index)?;
                Ok(Some(line))
            }
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(mut s: SortedLines) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(l) = s.next_line().unwrap() {
            out.push(l);
        }
        out
    }

    #[test]
    fn small_inputs_sort_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::new(dir.path(), 1 << 20).unwrap();
        for l in ["b", "a", "c", "a"] {
            s.push(l.into()).unwrap();
        }
        assert_eq!(s.spilled_runs(), 0);
        assert_eq!(drain(s.finish().unwrap()), ["a", "a", "b", "c"]);
    }

    #[test]
    fn large_inputs_spill_and_merge_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::new(dir.path(), 4096).unwrap();
        let mut expected = Vec::new();
        for i in 0..5000u64 {
            let line = format!(
                "chunks/{}/{}_0_{}",
                (i * 7919) % 13,
                (i * 104_729) % 5003,
                i % 3
            );
            expected.push(line.clone());
            s.push(line).unwrap();
        }
        assert!(s.spilled_runs() > 10, "runs: {}", s.spilled_runs());
        assert_eq!(s.len(), 5000);
        expected.sort();
        assert_eq!(drain(s.finish().unwrap()), expected);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "spill files are removed after the merge");
    }

    #[test]
    fn empty_input_yields_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = ExternalSorter::new(dir.path(), 4096).unwrap();
        assert!(s.is_empty());
        assert!(drain(s.finish().unwrap()).is_empty());
    }
}
