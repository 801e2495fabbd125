//! Sealed files of any length (FORMAT.md, "sealed dumps v1"): metadata dumps written with
//! `dump --encrypt` and an encrypted volume's `--backup-meta` backups. The file starts
//! with [`MAGIC`], a length-prefixed header the caller chooses (the volume's wrapped keys,
//! so the file can be opened without the engine it came from) and a random file id; then
//! records of up to [`RECORD`] plain bytes, each a `u32` length and a sealed segment
//! (domain `Dump`, named by the file id, indexed by its position, the last one tagged as
//! such): a record changed, dropped, moved or cut off fails to open.

use std::io::{self, Read, Write};

use super::{Domain, KeyRing, OpenFailure, SEALED_TRAILER, Sealer};

/// First bytes of a sealed file.
pub const MAGIC: &[u8; 21] = b"STRATA-SEALED-DUMP-1\n";
/// Plain bytes per record.
pub const RECORD: usize = 1 << 20;
const TAG_MORE: &[u8; 4] = b"SEG3";
const TAG_LAST: &[u8; 4] = b"END3";
const MAX_HEADER: usize = 1 << 20;
const FILE_ID: usize = 16;

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn name_of(file_id: &[u8; FILE_ID]) -> String {
    format!("dump/{}", strata_types::hex::encode(file_id))
}

/// Whether `head` (the first bytes of a file) starts a sealed file.
pub fn is_sealed(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// Writes a sealed file; [`SealedWriter::finish`] seals the last record.
pub struct SealedWriter<W: Write> {
    inner: W,
    sealer: Sealer,
    name: String,
    buf: Vec<u8>,
    index: u32,
}

impl<W: Write> std::fmt::Debug for SealedWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedWriter({})", self.name)
    }
}

impl<W: Write> SealedWriter<W> {
    /// Start a sealed file with `header` (readable by anyone: put only wrapped keys and
    /// names of volumes there).
    pub fn new(mut inner: W, ring: &KeyRing, header: &[u8]) -> io::Result<SealedWriter<W>> {
        let mut file_id = [0u8; FILE_ID];
        aws_lc_rs::rand::fill(&mut file_id).map_err(|_| invalid("no random bytes"))?;
        let len = u32::try_from(header.len())
            .ok()
            .filter(|n| usize::try_from(*n).is_ok_and(|n| n <= MAX_HEADER))
            .ok_or_else(|| invalid("header too large"))?;
        inner.write_all(MAGIC)?;
        inner.write_all(&len.to_le_bytes())?;
        inner.write_all(header)?;
        inner.write_all(&file_id)?;
        let name = name_of(&file_id);
        let sealer = ring.sealer(Domain::Dump, &name).map_err(io::Error::other)?;
        Ok(SealedWriter {
            inner,
            sealer,
            name,
            buf: Vec::with_capacity(RECORD),
            index: 0,
        })
    }

    fn seal_record(&mut self, tag: &[u8; 4]) -> io::Result<()> {
        let trailer = self
            .sealer
            .seal(self.index, tag, &mut self.buf)
            .map_err(io::Error::other)?;
        let len = u32::try_from(self.buf.len() + SEALED_TRAILER).map_err(|_| invalid("record"))?;
        self.inner.write_all(&len.to_le_bytes())?;
        self.inner.write_all(&self.buf)?;
        self.inner.write_all(&trailer)?;
        self.buf.clear();
        self.index = self
            .index
            .checked_add(1)
            .ok_or_else(|| invalid("file too long"))?;
        Ok(())
    }

    /// Seal what is buffered as the last record; the inner writer, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        self.seal_record(TAG_LAST)?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for SealedWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(RECORD - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == RECORD {
            self.seal_record(TAG_MORE)?;
        }
        Ok(n)
    }

    /// Flushes the inner writer only: records are sealed whole.
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The header of a sealed file, read from `r` (which must start with [`MAGIC`]); `r` is
/// then at the file id.
pub fn read_header<R: Read>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut magic = [0u8; MAGIC.len()];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(invalid("not a sealed file"));
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = usize::try_from(u32::from_le_bytes(len)).unwrap_or(usize::MAX);
    if len > MAX_HEADER {
        return Err(invalid("sealed file header too large"));
    }
    let mut header = vec![0u8; len];
    r.read_exact(&mut header)?;
    Ok(header)
}

/// Reads the plain bytes of a sealed file whose header [`read_header`] took.
pub struct SealedReader<R: Read> {
    inner: R,
    ring: KeyRing,
    name: String,
    plain: Vec<u8>,
    at: usize,
    index: u32,
    ended: bool,
}

impl<R: Read> std::fmt::Debug for SealedReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedReader({})", self.name)
    }
}

impl<R: Read> SealedReader<R> {
    pub fn new(mut inner: R, ring: KeyRing) -> io::Result<SealedReader<R>> {
        let mut file_id = [0u8; FILE_ID];
        inner.read_exact(&mut file_id)?;
        Ok(SealedReader {
            inner,
            ring,
            name: name_of(&file_id),
            plain: Vec::new(),
            at: 0,
            index: 0,
            ended: false,
        })
    }

    /// Open the next record into `plain`; false at the end of the file.
    fn next_record(&mut self) -> io::Result<bool> {
        if self.ended {
            return Ok(false);
        }
        let mut len = [0u8; 4];
        if let Err(e) = self.inner.read_exact(&mut len) {
            return Err(match e.kind() {
                io::ErrorKind::UnexpectedEof => invalid("the sealed file is cut short"),
                _ => e,
            });
        }
        let len = usize::try_from(u32::from_le_bytes(len)).unwrap_or(usize::MAX);
        if !(SEALED_TRAILER..=RECORD + SEALED_TRAILER).contains(&len) {
            return Err(invalid("damaged sealed record length"));
        }
        let mut sealed = vec![0u8; len];
        self.inner.read_exact(&mut sealed)?;
        let mut opener = self.ring.opener(Domain::Dump, &self.name);
        let (plain, tag) = opener
            .open_to_vec(self.index, &sealed, &[TAG_MORE, TAG_LAST])
            .map_err(|f| match f {
                OpenFailure::NoKey(id) => invalid(format!("sealed with data key {id}, not held")),
                other => invalid(format!("sealed record {}: {other}", self.index)),
            })?;
        self.ended = tag == *TAG_LAST;
        self.plain = plain;
        self.at = 0;
        self.index = self.index.saturating_add(1);
        Ok(true)
    }
}

impl<R: Read> Read for SealedReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.plain.len() {
            if !self.next_record()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.plain.len() - self.at);
        out[..n].copy_from_slice(&self.plain[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::super::{Cipher, DataKey, KeyRing};
    use super::*;

    fn ring() -> KeyRing {
        KeyRing::new(1, vec![DataKey::new(1, Cipher::Aes256Gcm, [4; 32])]).unwrap()
    }

    fn sealed(data: &[u8]) -> Vec<u8> {
        let mut w = SealedWriter::new(Vec::new(), &ring(), b"{\"header\":1}").unwrap();
        w.write_all(data).unwrap();
        w.finish().unwrap()
    }

    fn opened(file: &[u8]) -> io::Result<Vec<u8>> {
        let mut r = file;
        assert_eq!(read_header(&mut r)?, b"{\"header\":1}");
        let mut out = Vec::new();
        SealedReader::new(r, ring())?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn any_length_reads_back_and_holds_no_plaintext() {
        for len in [0, 1, RECORD - 1, RECORD, RECORD + 1, 3 * RECORD + 77] {
            let data: Vec<u8> = b"DUMP-PLAINTEXT-"
                .iter()
                .copied()
                .cycle()
                .take(len)
                .collect();
            let file = sealed(&data);
            assert!(is_sealed(&file));
            assert!(!file.windows(15).any(|w| w == b"DUMP-PLAINTEXT-"));
            assert_eq!(opened(&file).unwrap(), data, "{len}");
        }
    }

    #[test]
    fn cut_changed_or_reordered_files_do_not_open() {
        let data = vec![7u8; 2 * RECORD + 10];
        let file = sealed(&data);
        let body = MAGIC.len() + 4 + 12 + FILE_ID;
        // Cut after the first record: its last record is missing.
        assert!(opened(&file[..body + 4 + RECORD + SEALED_TRAILER]).is_err());
        let mut changed = file.clone();
        changed[body + 100] ^= 1;
        assert!(opened(&changed).is_err());
        // Records 0 and 1 swapped.
        let rec = 4 + RECORD + SEALED_TRAILER;
        let mut swapped = file.clone();
        swapped[body..body + rec].copy_from_slice(&file[body + rec..body + 2 * rec]);
        swapped[body + rec..body + 2 * rec].copy_from_slice(&file[body..body + rec]);
        assert!(opened(&swapped).is_err());
        assert_eq!(opened(&file).unwrap(), data);
    }
}
