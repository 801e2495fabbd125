//! The way back (`strata dump --juicefs`): a volume imported from JuiceFS written as a
//! dump JuiceFS loads (`juicefs load`), as long as every block it reads is still one of
//! JuiceFS's (nothing written since the import, or rewritten only as metadata: renames,
//! deletes, links, modes, owners, times, xattrs, truncation). The tree is written as it
//! is walked — a directory's entries a page at a time, each file's node under every name
//! it has, as JuiceFS writes them — so memory stays bounded by the tree's depth.

use std::future::Future;
use std::io::Write;
use std::pin::Pin;

use serde::Serialize;
use serde_json::json;
use strata_types::{FileType, Ino, Secret};

use crate::error::{MetaError, Result};
use crate::format::Format;
use crate::keys;
use crate::meta::{DumpNode, Meta, NEXT_INODE, NEXT_SLICE, QuotaTarget, ScanCursor};

/// Extended attributes JuiceFS would take for its own ACLs (not exported).
const ACL_XATTRS: [&[u8]; 2] = [b"system.posix_acl_access", b"system.posix_acl_default"];

/// What `export_juicefs` wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// Nodes written (a file under several names counts each time).
    pub nodes: u64,
    /// Access control lists left out (JuiceFS volumes of the import had none).
    pub acls_left_out: u64,
}

type Out<'a> = &'a mut (dyn Write + Send);
type Step<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

/// `text` with JuiceFS's escaping: printable ASCII but `%` as it is, every other byte
/// `%XX` (what `unescape` reads).
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn write(out: Out<'_>, text: &str) -> Result<()> {
    out.write_all(text.as_bytes())
        .map_err(|e| MetaError::Invalid(format!("writing the dump: {e}")))
}

fn quoted(text: &str) -> Result<String> {
    serde_json::to_string(text).map_err(|e| MetaError::Invalid(format!("dump encoding: {e}")))
}

#[derive(Serialize)]
struct JuiceSliceOut {
    id: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pos: u64,
    #[serde(skip_serializing_if = "is_zero")]
    size: u64,
    #[serde(skip_serializing_if = "is_zero")]
    off: u64,
    #[serde(skip_serializing_if = "is_zero")]
    len: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Meta {
    /// Write the volume as a JuiceFS dump (JSON) to `out`; refused before anything is
    /// written when a block is not JuiceFS's. `secret` and `rsa_key` are what the
    /// settings show for the object store's secret key and the encryption key.
    pub async fn export_juicefs(
        &self,
        out: Out<'_>,
        secret: Option<&Secret>,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<Exported> {
        let format = self.current_format()?;
        let below = self.check_juicefs_readable(&format).await?;
        write(out, &self.juicefs_head(&format, secret, below).await?)?;
        let mut done = Exported::default();
        write(out, ",\n\"FSTree\": ")?;
        self.export_node(Ino::ROOT, out, &mut done, progress)
            .await?;
        if self.getattr(Ino::TRASH).await.is_ok() {
            write(out, ",\n\"Trash\": ")?;
            self.export_node(Ino::TRASH, out, &mut done, progress)
                .await?;
        }
        write(out, "\n}\n")?;
        Ok(done)
    }

    /// The id below which slices are JuiceFS's, once no chunk reads any other.
    async fn check_juicefs_readable(&self, format: &Format) -> Result<u64> {
        let foreign = format
            .foreign
            .as_ref()
            .filter(|f| f.kind == "juicefs")
            .ok_or_else(|| {
                MetaError::Invalid(
                    "the volume was not imported from JuiceFS: JuiceFS cannot read Strata's \
                     blocks"
                        .into(),
                )
            })?;
        let mut cursor: ScanCursor = None;
        loop {
            let (chunks, next) = self.chunk_page(&cursor, 2000).await?;
            for chunk in &chunks {
                if let Some(s) = chunk
                    .slices
                    .iter()
                    .find(|s| s.id != 0 && s.id >= foreign.slices_below)
                {
                    return Err(MetaError::Invalid(format!(
                        "inode {} reads data Strata wrote (slice {}), which JuiceFS cannot \
                         read: only a volume whose files all still read JuiceFS's objects \
                         can go back",
                        chunk.ino, s.id
                    )));
                }
            }
            cursor = next;
            if cursor.is_none() {
                return Ok(foreign.slices_below);
            }
        }
    }

    /// `{"Setting": ..., "Counters": ..., "Sustained": [], "DelFiles": [], "Quotas": ...`
    async fn juicefs_head(
        &self,
        format: &Format,
        secret: Option<&Secret>,
        below: u64,
    ) -> Result<String> {
        let foreign = format.foreign.as_ref();
        let mut setting = json!({
            "Name": format.name,
            "UUID": foreign.map_or(String::new(), |f| f.uuid.clone()),
            "Storage": format.storage,
            "Bucket": format.bucket,
            "BlockSize": format.block_size_kib,
            "Compression": foreign.map_or("none", |f| f.compression.as_str()),
            "TrashDays": format.trash_days,
            "MetaVersion": 1,
            "DirStats": true,
        });
        let fields = setting
            .as_object_mut()
            .ok_or_else(|| bad_json("settings"))?;
        let mut put = |k: &str, v: serde_json::Value| {
            fields.insert(k.into(), v);
        };
        if let Some(ak) = &format.access_key {
            put("AccessKey", json!(ak));
        }
        if let Some(sk) = secret {
            put("SecretKey", json!(sk.expose()));
        }
        if format.capacity > 0 {
            put("Capacity", json!(format.capacity));
        }
        if format.inodes > 0 {
            put("Inodes", json!(format.inodes));
        }
        if foreign.is_some_and(|f| f.hash_prefix) {
            put("HashPrefix", json!(true));
        }
        if let Some(cipher) = foreign.and_then(|f| f.encryption.as_deref()) {
            let pem = format
                .encryption
                .as_ref()
                .and_then(|e| e.rsa_private_key.as_ref())
                .ok_or_else(|| MetaError::Invalid("the settings lack the RSA key".into()))?;
            put("EncryptKey", json!(pem.expose()));
            let algo = match cipher {
                "chacha20" => "chacha20-rsa",
                _ => "aes256gcm-rsa",
            };
            put("EncryptAlgo", json!(algo));
        }
        let usage = self.usage();
        let next_inode = self.read_counter_key(&keys::counter(NEXT_INODE)).await?;
        let next_slice = self
            .read_counter_key(&keys::counter(NEXT_SLICE))
            .await?
            .max(i64::try_from(below).unwrap_or(i64::MAX));
        let counters = json!({
            "usedSpace": usage.space,
            "usedInodes": usage.inodes,
            "nextInodes": next_inode,
            "nextChunk": next_slice,
            "nextSession": 1,
            "nextTrash": self.next_trash_number().await?,
        });
        let mut quotas = serde_json::Map::new();
        for (target, q) in self.list_quotas().await? {
            if let QuotaTarget::Dir(ino) = target {
                quotas.insert(
                    ino.0.to_string(),
                    json!({"maxSpace": q.max_space, "maxInodes": q.max_inodes,
                           "usedSpace": q.used_space, "usedInodes": q.used_inodes}),
                );
            }
        }
        let encode = |v: &serde_json::Value| {
            serde_json::to_string_pretty(v).map_err(|e| bad_json(&e.to_string()))
        };
        Ok(format!(
            "{{\n\"Setting\": {},\n\"Counters\": {},\n\"Sustained\": [],\n\"DelFiles\": [],\n\"Quotas\": {}",
            encode(&setting)?,
            encode(&counters)?,
            encode(&serde_json::Value::Object(quotas))?
        ))
    }

    /// One past the highest trash-hour inode (JuiceFS numbers them from the trash's).
    async fn next_trash_number(&self) -> Result<u64> {
        let mut next = 0;
        if self.getattr(Ino::TRASH).await.is_err() {
            return Ok(next);
        }
        let mut pages = self.entry_pages(Ino::TRASH, false);
        while let Some(page) = pages.next(self).await? {
            for e in page {
                next = next.max(e.ino.0.saturating_sub(Ino::TRASH.0) + 1);
            }
        }
        Ok(next)
    }

    /// `{"attr": ..., "symlink"/"xattrs"/"chunks"/"entries": ...}` of `ino`.
    fn export_node<'a>(
        &'a self,
        ino: Ino,
        out: Out<'a>,
        done: &'a mut Exported,
        progress: &'a mut (dyn FnMut(u64) + Send),
    ) -> Step<'a> {
        Box::pin(async move {
            let node = self.dump_node(ino).await?;
            write(out, &node_fields(&node, done)?)?;
            done.nodes += 1;
            progress(done.nodes);
            if FileType::from_code(node.kind) == Some(FileType::Directory) {
                write(out, ",\n\"entries\": {")?;
                let mut first = true;
                let mut pages = self.entry_pages(ino, false);
                while let Some(page) = pages.next(self).await? {
                    for e in page {
                        let sep = if first { "\n" } else { ",\n" };
                        first = false;
                        write(out, &format!("{sep}{}: ", quoted(&escape(&e.name))?))?;
                        self.export_node(e.ino, &mut *out, &mut *done, &mut *progress)
                            .await?;
                    }
                }
                write(out, "\n}")?;
            }
            write(out, "}")
        })
    }
}

/// The node's fields up to (not including) its entries, from the opening brace.
fn node_fields(node: &DumpNode, done: &mut Exported) -> Result<String> {
    let kind = FileType::from_code(node.kind).ok_or_else(|| bad_json("an inode type"))?;
    let split = |ns: i64| (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let ((at, an), (mt, mn), (ct, cn)) = (split(node.atime), split(node.mtime), split(node.ctime));
    let mut attr = json!({
        "inode": node.ino, "type": kind_name(kind), "mode": node.mode & 0o7777,
        "uid": node.uid, "gid": node.gid,
        "atime": at, "mtime": mt, "ctime": ct, "atimensec": an, "mtimensec": mn, "ctimensec": cn,
        "nlink": node.nlink,
        "length": if kind == FileType::Directory { 0 } else { node.length },
    });
    if node.rdev != 0
        && let Some(fields) = attr.as_object_mut()
    {
        fields.insert("rdev".into(), json!(node.rdev));
    }
    let mut text = format!("{{\"attr\": {}", to_json(&attr)?);
    if let Some(target) = &node.target {
        text.push_str(&format!(
            ",\n\"symlink\": {}",
            quoted(&escape(&target.bytes()?))?
        ));
    }
    let mut xattrs = Vec::new();
    for (name, value) in &node.xattrs {
        let name = name.bytes()?;
        if ACL_XATTRS.contains(&name.as_slice()) {
            done.acls_left_out += 1;
            continue;
        }
        xattrs.push(json!({"name": escape(&name), "value": escape(&value.bytes()?)}));
    }
    if !xattrs.is_empty() {
        text.push_str(&format!(",\n\"xattrs\": {}", to_json(&json!(xattrs))?));
    }
    if !node.chunks.is_empty() {
        let chunks: Vec<_> = node
            .chunks
            .iter()
            .map(|(index, records)| {
                let slices: Vec<JuiceSliceOut> = records
                    .iter()
                    .map(|&[pos, id, size, off, len]| JuiceSliceOut {
                        id,
                        pos,
                        size: if id == 0 { 0 } else { size },
                        off,
                        len,
                    })
                    .collect();
                json!({"index": index, "slices": slices})
            })
            .collect();
        text.push_str(&format!(",\n\"chunks\": {}", to_json(&json!(chunks))?));
    }
    Ok(text)
}

fn to_json(v: &serde_json::Value) -> Result<String> {
    serde_json::to_string(v).map_err(|e| bad_json(&e.to_string()))
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Regular => "regular",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharDevice => "chardev",
        FileType::BlockDevice => "blockdev",
    }
}

fn bad_json(what: &str) -> MetaError {
    MetaError::Invalid(format!("JuiceFS dump encoding: {what}"))
}
