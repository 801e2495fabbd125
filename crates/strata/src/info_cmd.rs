//! `strata info PATH`: what a file or directory on a mounted volume is made of — its inode
//! and attributes, and for files every chunk's slices and the object names of their blocks.
//! Asked of the mount serving the path, through its `.control`.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_vfs::control_wire::{ControlOp, ControlResult};

use crate::control;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// A file or directory on a mounted Strata volume
    path: PathBuf,
}

pub fn run_info(a: InfoArgs) -> Result<()> {
    let path = std::fs::canonicalize(&a.path).with_context(|| format!("{}", a.path.display()))?;
    let mount = control::mount_of(&path)?;
    let ino = std::fs::symlink_metadata(&path)?.ino();
    let ControlResult::Info(info) = control::request(&mount, ControlOp::Info { ino })
        .with_context(|| format!("{}", path.display()))?
    else {
        bail!("the mount answered with something other than file information");
    };
    println!(
        "{}:\n  inode: {}\n  type: {}\n  mode: {:o}\n  uid: {}  gid: {}\n  links: {}\n  length: {}",
        path.display(),
        info.ino,
        info.kind,
        info.mode,
        info.uid,
        info.gid,
        info.nlink,
        info.length
    );
    if let Some((bytes, inodes)) = info.dir_usage {
        println!("  usage of direct children: {bytes} bytes, {inodes} inodes");
    }
    for chunk in info.chunks {
        println!("  chunk {}: {} slices", chunk.index, chunk.slices.len());
        for s in chunk.slices {
            println!(
                "    pos {} len {} <- slice {} (size {}, off {})",
                s.pos, s.len, s.id, s.size, s.off
            );
            for object in s.objects {
                println!("      {object}");
            }
        }
    }
    Ok(())
}
