//! The unsynced bytes of one file: the pages written since its last `fsync` and the size
//! the file has for its readers. Nothing here reaches the backing file until [`Pages::
//! write_back`]; a power cut simply forgets a file's `Pages`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The granularity of unsynced data (a page of the page cache).
pub const PAGE: u64 = 4096;

fn page_len() -> usize {
    usize::try_from(PAGE).unwrap_or(4096)
}

/// Unsynced writes to one file.
#[derive(Debug)]
pub struct Pages {
    /// The file's size for readers (the backing file is never longer).
    pub size: u64,
    /// Page index -> the page's whole contents as readers see them.
    dirty: BTreeMap<u64, Vec<u8>>,
}

impl Pages {
    /// No unsynced writes yet to a file whose backing size is `size`.
    pub fn new(size: u64) -> Pages {
        Pages {
            size,
            dirty: BTreeMap::new(),
        }
    }

    /// Bytes held in memory only.
    pub fn bytes(&self) -> u64 {
        u64::try_from(self.dirty.len()).unwrap_or(u64::MAX) * PAGE
    }

    /// The page `index` as readers see it: unsynced contents or the backing bytes (zeros
    /// past the backing file's end).
    fn load(&self, backing: &File, index: u64) -> io::Result<Vec<u8>> {
        if let Some(page) = self.dirty.get(&index) {
            return Ok(page.clone());
        }
        let mut page = vec![0u8; page_len()];
        let mut filled = 0;
        while filled < page.len() {
            let at = index * PAGE + u64::try_from(filled).unwrap_or(0);
            match backing.read_at(&mut page[filled..], at) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(page)
    }

    /// Keep `data` at `offset` in memory.
    pub fn write(&mut self, backing: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset + u64::try_from(data.len()).unwrap_or(0);
        let mut at = offset;
        while at < end {
            let index = at / PAGE;
            let in_page = usize::try_from(at % PAGE).unwrap_or(0);
            let take = (page_len() - in_page).min(usize::try_from(end - at).unwrap_or(0));
            let from = usize::try_from(at - offset).unwrap_or(0);
            let mut page = self.load(backing, index)?;
            page[in_page..in_page + take].copy_from_slice(&data[from..from + take]);
            self.dirty.insert(index, page);
            at += u64::try_from(take).unwrap_or(0);
        }
        self.size = self.size.max(end);
        Ok(())
    }

    /// Up to `len` bytes at `offset`, as readers see them.
    pub fn read(&self, backing: &File, offset: u64, len: u32) -> io::Result<Vec<u8>> {
        let end = (offset + u64::from(len)).min(self.size);
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            let index = at / PAGE;
            let in_page = usize::try_from(at % PAGE).unwrap_or(0);
            let take = (page_len() - in_page).min(usize::try_from(end - at).unwrap_or(0));
            let page = self.load(backing, index)?;
            out.extend_from_slice(&page[in_page..in_page + take]);
            at += u64::try_from(take).unwrap_or(0);
        }
        Ok(out)
    }

    /// The file was truncated (or extended) to `size`, in the backing file too.
    pub fn truncate(&mut self, size: u64) {
        self.size = size;
        let first_gone = size.div_ceil(PAGE);
        self.dirty.split_off(&first_gone);
        if let Some(page) = self.dirty.get_mut(&(size / PAGE)) {
            let keep = usize::try_from(size % PAGE).unwrap_or(0);
            page[keep..].fill(0);
        }
    }

    /// Write every unsynced page to `backing` and give it the readers' size.
    pub fn write_back(&self, backing: &File) -> io::Result<()> {
        for (index, page) in &self.dirty {
            let start = index * PAGE;
            if start >= self.size {
                continue;
            }
            let len = usize::try_from((self.size - start).min(PAGE)).unwrap_or(0);
            backing.write_all_at(&page[..len], start)?;
        }
        if backing.metadata()?.len() != self.size {
            backing.set_len(self.size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing(bytes: &[u8]) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!(
            "crashfs-pages-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::write(&path, bytes).unwrap();
        let file = File::options().read(true).write(true).open(&path).unwrap();
        (path, file)
    }

    #[test]
    fn unsynced_writes_are_read_back_and_reach_the_file_only_when_written_back() {
        let (path, file) = backing(&[1u8; 5000]);
        let mut pages = Pages::new(5000);
        pages.write(&file, 4090, &[2u8; 20]).unwrap();
        pages.write(&file, 9000, b"tail").unwrap();
        assert_eq!(pages.size, 9004);
        let seen = pages.read(&file, 0, 10_000).unwrap();
        assert_eq!(seen.len(), 9004);
        assert_eq!(
            &seen[4089..4111],
            &[[1u8].as_slice(), &[2u8; 20], &[1u8]].concat()
        );
        assert!(seen[5000..9000].iter().all(|b| *b == 0));
        assert_eq!(std::fs::read(&path).unwrap(), vec![1u8; 5000]);
        pages.write_back(&file).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), seen);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn truncation_drops_the_pages_past_the_end_and_zeroes_the_rest_of_the_last() {
        let (path, file) = backing(b"");
        let mut pages = Pages::new(0);
        pages.write(&file, 0, &[3u8; 10_000]).unwrap();
        pages.truncate(4100);
        pages.write(&file, 6000, b"x").unwrap();
        let seen = pages.read(&file, 0, 7000).unwrap();
        assert_eq!(seen.len(), 6001);
        assert!(seen[..4100].iter().all(|b| *b == 3));
        assert!(seen[4100..6000].iter().all(|b| *b == 0));
        pages.write_back(&file).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), seen);
        std::fs::remove_file(path).unwrap();
    }
}
