//! `Client.warmup`: read every file at or below a path once, so that its blocks sit in
//! this client's block cache (memory or disk) for the reads that follow.

use strata_types::{FileType, Ino};

use crate::error::{OnPath, Result};
use crate::paths::{list_dir, resolve};
use crate::volume::Volume;

/// Bytes asked for by one read while warming.
const PIECE: u32 = 4 << 20;

/// Warm `path` (a file or a directory tree); returns (files, bytes) read.
pub async fn warm(vol: &Volume, path: &[u8]) -> Result<(u64, u64)> {
    let top = resolve(vol, path, true).await?;
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut dirs: Vec<Ino> = Vec::new();
    match vol.vfs.getattr(top).await.on(path)?.kind {
        FileType::Directory => dirs.push(top),
        FileType::Regular => {
            bytes += warm_file(vol, top, path).await?;
            files += 1;
        }
        _ => {}
    }
    while let Some(dir) = dirs.pop() {
        for e in list_dir(vol, dir, path).await? {
            match e.kind {
                FileType::Directory => dirs.push(e.ino),
                FileType::Regular => {
                    bytes += warm_file(vol, e.ino, &e.name).await?;
                    files += 1;
                }
                _ => {}
            }
        }
    }
    Ok((files, bytes))
}

async fn warm_file(vol: &Volume, ino: Ino, name: &[u8]) -> Result<u64> {
    let (fh, _) = vol.vfs.open(&vol.ctx, ino, 0).await.on(name)?;
    let mut off = 0u64;
    let read = loop {
        match vol.vfs.read(fh, off, PIECE).await {
            Ok(data) if data.is_empty() => break Ok(off),
            Ok(data) => off += u64::try_from(data.len()).unwrap_or(u64::from(PIECE)),
            Err(e) => break Err(e),
        }
    };
    let released = vol.vfs.release(fh).await;
    let n = read.on(name)?;
    released.on(name)?;
    Ok(n)
}
