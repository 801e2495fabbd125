//! `strata info PATH`: what a file or directory on a mounted volume is made of — its inode
//! and attributes, and for files every chunk's slices and the object names of their blocks.
//! The volume is found through the `.config` file at the root of the mount.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use strata_chunk::{block_key, block_sizes};
use strata_types::{CHUNK_SIZE, FileType, Ino};

use crate::wiring;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// A file or directory on a mounted Strata volume
    path: PathBuf,
}

pub fn run_info(a: InfoArgs) -> Result<()> {
    let path = std::fs::canonicalize(&a.path).with_context(|| format!("{}", a.path.display()))?;
    let ino = Ino(std::fs::symlink_metadata(&path)?.ino());
    // `.config` hides the engine's password; it comes from META_PASSWORD instead.
    let url = wiring::meta_url_of_path(&path)?;
    let rt = wiring::runtime()?;
    rt.block_on(async {
        let (meta, format) = wiring::load_meta(&url).await?;
        let attr = meta.getattr(ino).await.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        println!("{}:\n  inode: {}\n  type: {:?}\n  mode: {:o}\n  uid: {}  gid: {}\n  links: {}\n  length: {}",
            path.display(), ino, attr.kind, attr.mode, attr.uid, attr.gid, attr.nlink, attr.length);
        match attr.kind {
            FileType::Directory => {
                let (bytes, inodes) = meta.dir_usage(ino).await.map_err(|e| anyhow::anyhow!("{e}"))?;
                println!("  usage of direct children: {bytes} bytes, {inodes} inodes");
            }
            FileType::Regular => {
                let block_size = format.block_size_kib << 10;
                for index in 0..attr.length.div_ceil(CHUNK_SIZE) {
                    let index = u32::try_from(index)?;
                    let slices = meta.read_chunk(ino, index).await.map_err(|e| anyhow::anyhow!("{e}"))?;
                    println!("  chunk {index}: {} slices", slices.len());
                    for s in slices {
                        println!("    pos {} len {} <- slice {} (size {}, off {})", s.pos, s.len, s.id, s.size, s.off);
                        if s.id == 0 {
                            continue;
                        }
                        for (b, size) in block_sizes(s.size, block_size) {
                            println!("      {}/{}", format.name, block_key(s.id, b, size));
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    })
}
