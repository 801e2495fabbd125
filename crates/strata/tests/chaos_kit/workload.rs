//! One actor of the chaos harness: a loop of random file-system operations on a client's
//! VFS, each recorded in the shared history as it starts and when it ends, in the terms
//! of the checker's model (`strata_testkit::history`). Paths are two fixed directories
//! of three names each, so operations collide often; file contents are whole writes of
//! one length that a reader can attribute to exactly one write.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_testkit::history::model::File;
use strata_testkit::history::{Failure, History, InoKey, Name, Op, Outcome, State, Value, content};
use strata_types::{Errno, Ino};
use strata_vfs::{Ctx, SetAttr, Vfs};

/// Bytes of every write: two blocks of a 64 KiB-block volume, the second one partial.
pub const CONTENT_LEN: usize = 96 << 10;
pub const DIRS: u8 = 2;
pub const NAMES: u8 = 3;

/// The directories the workload runs in (made before it starts, never changed).
#[derive(Debug)]
pub struct Namespace {
    pub dirs: Vec<Ino>,
}

pub fn name_bytes(n: u8) -> Vec<u8> {
    format!("n{n}").into_bytes()
}

/// What an actor saw that no model order can excuse, found on the spot.
#[derive(Debug, Default)]
pub struct Findings {
    /// Reads returning bytes no write wrote.
    pub garbage: Vec<String>,
    /// Errors no operation of this workload should return.
    pub odd_errors: Vec<String>,
}

/// Counts shared by the actors.
#[derive(Debug, Default)]
pub struct Shared {
    /// The next write's number (write numbers are unique across actors).
    pub next_content: AtomicU64,
    pub findings: Mutex<Findings>,
}

/// One actor: a client's VFS, driven by its own random generator.
pub struct Actor {
    pub id: u32,
    pub vfs: Arc<Vfs>,
    pub history: Arc<History>,
    pub ns: Arc<Namespace>,
    pub shared: Arc<Shared>,
    /// How old a lookup this client answers from its metadata cache may be.
    pub stale: Duration,
    pub rng: StdRng,
}

impl Actor {
    pub fn new(
        id: u32,
        vfs: Arc<Vfs>,
        history: Arc<History>,
        ns: Arc<Namespace>,
        shared: Arc<Shared>,
        stale: Duration,
        seed: u64,
    ) -> Actor {
        Actor {
            id,
            vfs,
            history,
            ns,
            shared,
            stale,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Run operations until `until` or until the actors together started `budget`
    /// (counted in `started`); gives the actor back for the next epoch.
    pub async fn run(
        mut self,
        until: Instant,
        started: Arc<AtomicU64>,
        budget: u64,
    ) -> (Actor, u64) {
        let mut done = 0;
        while Instant::now() < until && started.fetch_add(1, Ordering::Relaxed) < budget {
            self.step().await;
            done += 1;
        }
        (self, done)
    }

    fn name(&mut self) -> Name {
        Name {
            dir: self.rng.random_range(0..DIRS),
            name: self.rng.random_range(0..NAMES),
        }
    }

    async fn step(&mut self) {
        let at = self.name();
        match self.rng.random_range(0..100) {
            0..15 => self.create(at).await,
            15..30 => self.write(at).await,
            30..45 => self.read(at).await,
            45..57 => {
                let to = self.name();
                self.rename(at, to).await
            }
            57..63 => {
                let to = self.name();
                self.link(at, to).await
            }
            63..75 => self.unlink(at).await,
            75..80 => {
                let mode = 0o600 | self.rng.random_range(0..0o100);
                self.chmod(at, mode).await
            }
            80..90 => self.stat(at).await,
            _ => {
                let dir = self.rng.random_range(0..DIRS);
                self.list(dir).await
            }
        }
    }

    fn dir(&self, at: Name) -> Ino {
        self.ns.dirs[usize::from(at.dir)]
    }

    /// The outcome of a failed operation: ENOENT and EEXIST are answers; EIO and
    /// timeouts leave it unknown; anything else is noted as odd (and unknown).
    fn failed(&self, what: &str, e: Errno) -> Outcome {
        match e {
            Errno::ENOENT => Outcome::Failed(Failure::NotFound),
            Errno::EEXIST => Outcome::Failed(Failure::Exists),
            Errno::EIO | Errno::ETIMEDOUT | Errno::EAGAIN | Errno::EINTR => Outcome::Unknown,
            other => {
                self.shared
                    .findings
                    .lock()
                    .odd_errors
                    .push(format!("actor {}: {what}: errno {}", self.id, other.0));
                Outcome::Unknown
            }
        }
    }

    async fn create(&self, at: Name) {
        let call = self.history.call(self.id, Op::Create { at });
        let made = self
            .vfs
            .create(&Ctx::root(), self.dir(at), &name_bytes(at.name), 0o644)
            .await;
        let outcome = match made {
            Ok((entry, fh)) => {
                // Nothing buffered: closing cannot change the outcome.
                let _ = self.vfs.release(fh).await;
                Outcome::Ok(Value::Ino(entry.ino.0))
            }
            Err(e) => self.failed("create", e),
        };
        self.history.ret(call, outcome);
    }

    /// Look `at` up as an `open` walks a path (possibly from the metadata cache).
    async fn resolve(&self, at: Name) -> Option<Ino> {
        let call = self
            .history
            .call_stale(self.id, Op::Resolve { at }, self.stale);
        let found = self
            .vfs
            .lookup(&Ctx::root(), self.dir(at), &name_bytes(at.name))
            .await;
        let (outcome, ino) = match found {
            Ok(entry) => (Outcome::Ok(Value::Ino(entry.ino.0)), Some(entry.ino)),
            Err(Errno::ENOENT) => (Outcome::Ok(Value::Absent), None),
            Err(e) => (self.failed("lookup", e), None),
        };
        self.history.ret(call, outcome);
        ino
    }

    /// Write a whole new content to the file at `at`: open, write, fsync, close.
    async fn write(&self, at: Name) {
        let Some(ino) = self.resolve(at).await else {
            return;
        };
        let n = self.shared.next_content.fetch_add(1, Ordering::Relaxed) + 1;
        let call = self.history.call(
            self.id,
            Op::Write {
                ino: ino.0,
                content: n,
            },
        );
        let fh = match self.vfs.open(&Ctx::root(), ino, 1).await {
            Ok((fh, _)) => fh,
            Err(e) => {
                let outcome = self.failed("open for writing", e);
                return self.history.ret(call, outcome);
            }
        };
        let data = content::bytes(n, CONTENT_LEN);
        let mut result = self.vfs.write(fh, 0, &data).await.map(|_| ());
        if result.is_ok() {
            result = self.vfs.fsync(fh).await;
        }
        let released = self.vfs.release(fh).await;
        let outcome = match result.and(released) {
            Ok(()) => Outcome::Ok(Value::None),
            // Removed by another client while open (SEMANTICS: such a handle's writes and
            // fsync fail with ENOENT): what was committed before the removal was read by
            // others, so the write may have landed.
            Err(Errno::ENOENT) => Outcome::Unknown,
            // Kept in the buffer and tried again later: it may still land.
            Err(e) => self.failed("write", e),
        };
        self.history.ret(call, outcome);
    }

    /// Read the whole file at `at`: open, read, close.
    async fn read(&self, at: Name) {
        let Some(ino) = self.resolve(at).await else {
            return;
        };
        let call = self.history.call(self.id, Op::Read { ino: ino.0 });
        let fh = match self.vfs.open(&Ctx::root(), ino, 0).await {
            Ok((fh, _)) => fh,
            Err(e) => {
                let outcome = self.failed("open for reading", e);
                return self.history.ret(call, outcome);
            }
        };
        let size = u32::try_from(CONTENT_LEN * 2).unwrap_or(u32::MAX);
        let read = self.vfs.read(fh, 0, size).await;
        let _ = self.vfs.release(fh).await;
        let outcome = match read {
            Ok(bytes) => match content::decode(&bytes, CONTENT_LEN) {
                Some(n) => Outcome::Ok(Value::Content(n)),
                None => {
                    let zeros = bytes.iter().filter(|b| **b == 0).count();
                    let nonzero_from = bytes.iter().position(|b| *b != 0);
                    let attr = self.vfs.meta().getattr(ino).await;
                    let slices = self.vfs.meta().read_chunk(ino, 0).await;
                    self.shared.findings.lock().garbage.push(format!(
                        "actor {}: inode {} read {} bytes that no write wrote (first word \
                         {:x?}; {zeros} zero bytes, first non-zero at {nonzero_from:?}); \
                         now: length {:?}, slices {:?}",
                        self.id,
                        ino.0,
                        bytes.len(),
                        bytes.get(..8),
                        attr.map(|a| a.length),
                        slices
                    ));
                    Outcome::Unknown
                }
            },
            Err(e) => self.failed("read", e),
        };
        self.history.ret(call, outcome);
    }

    async fn rename(&self, from: Name, to: Name) {
        let call = self.history.call(self.id, Op::Rename { from, to });
        let renamed = self
            .vfs
            .rename(
                &Ctx::root(),
                self.dir(from),
                &name_bytes(from.name),
                self.dir(to),
                &name_bytes(to.name),
                0,
            )
            .await;
        let outcome = match renamed {
            Ok(()) => Outcome::Ok(Value::None),
            Err(e) => self.failed("rename", e),
        };
        self.history.ret(call, outcome);
    }

    async fn link(&self, from: Name, to: Name) {
        let Some(ino) = self.resolve(from).await else {
            return;
        };
        let call = self.history.call(self.id, Op::Link { ino: ino.0, to });
        let linked = self
            .vfs
            .link(&Ctx::root(), ino, self.dir(to), &name_bytes(to.name))
            .await;
        let outcome = match linked {
            Ok(_) => Outcome::Ok(Value::None),
            Err(e) => self.failed("link", e),
        };
        self.history.ret(call, outcome);
    }

    async fn unlink(&self, at: Name) {
        let call = self.history.call(self.id, Op::Unlink { at });
        let removed = self
            .vfs
            .unlink(&Ctx::root(), self.dir(at), &name_bytes(at.name))
            .await;
        let outcome = match removed {
            Ok(()) => Outcome::Ok(Value::None),
            Err(e) => self.failed("unlink", e),
        };
        self.history.ret(call, outcome);
    }

    async fn chmod(&self, at: Name, mode: u16) {
        let Some(ino) = self.resolve(at).await else {
            return;
        };
        let call = self.history.call(
            self.id,
            Op::Chmod {
                ino: ino.0,
                mode: u32::from(mode),
            },
        );
        let set = SetAttr {
            mode: Some(mode),
            ..SetAttr::default()
        };
        let outcome = match self.vfs.setattr(&Ctx::root(), ino, &set).await {
            Ok(_) => Outcome::Ok(Value::None),
            Err(e) => self.failed("chmod", e),
        };
        self.history.ret(call, outcome);
    }

    async fn stat(&self, at: Name) {
        let call = self
            .history
            .call_stale(self.id, Op::Stat { at }, self.stale);
        let found = self
            .vfs
            .lookup(&Ctx::root(), self.dir(at), &name_bytes(at.name))
            .await;
        let outcome = match found {
            Ok(entry) => Outcome::Ok(Value::Attr {
                ino: entry.ino.0,
                mode: u32::from(entry.attr.mode),
                nlink: entry.attr.nlink,
                // The length counts this client's own uncommitted writes (of the other
                // actor of this client): not checked here; reads check contents.
                empty: None,
            }),
            Err(Errno::ENOENT) => Outcome::Ok(Value::Absent),
            Err(e) => self.failed("stat", e),
        };
        self.history.ret(call, outcome);
    }

    async fn list(&self, dir: u8) {
        let call = self.history.call(self.id, Op::List { dir });
        let outcome = match list_names(&self.vfs, self.ns.dirs[usize::from(dir)]).await {
            Ok(names) => Outcome::Ok(Value::Names(names)),
            Err(e) => self.failed("readdir", e),
        };
        self.history.ret(call, outcome);
    }
}

/// The workload's names in directory `dir`, ascending, read as `ls` reads them.
pub async fn list_names(vfs: &Vfs, dir: Ino) -> Result<Vec<u8>, Errno> {
    let fh = vfs.opendir(&Ctx::root(), dir).await?;
    let mut names = Vec::new();
    let mut offset = 0;
    let listed = loop {
        match vfs.readdir(fh, offset, false).await {
            Ok(page) if page.is_empty() => break Ok(()),
            Ok(page) => {
                for e in &page {
                    offset = e.next_offset;
                    if let Some(n) = (0..NAMES).find(|n| name_bytes(*n) == e.name) {
                        names.push(n);
                    }
                }
            }
            Err(e) => break Err(e),
        }
    };
    let _ = vfs.releasedir(fh).await;
    listed?;
    names.sort_unstable();
    Ok(names)
}

/// Look at everything, strictly (`vfs` must not answer from a metadata cache): list both
/// directories, stat every name and read every file, each recorded in `history` as
/// client 99. Returns the state seen, which starts the next epoch's model.
pub async fn observe(vfs: &Vfs, ns: &Namespace, history: &History) -> State {
    let mut state = State::default();
    for dir in 0..DIRS {
        let call = history.call(99, Op::List { dir });
        let names = list_names(vfs, ns.dirs[usize::from(dir)]).await.unwrap();
        history.ret(call, Outcome::Ok(Value::Names(names.clone())));
        for name in names {
            let at = Name { dir, name };
            let call = history.call(99, Op::Stat { at });
            let entry = vfs
                .lookup(&Ctx::root(), ns.dirs[usize::from(dir)], &name_bytes(name))
                .await
                .unwrap();
            let (ino, mode, nlink) = (entry.ino.0, u32::from(entry.attr.mode), entry.attr.nlink);
            history.ret(
                call,
                Outcome::Ok(Value::Attr {
                    ino,
                    mode,
                    nlink,
                    empty: Some(entry.attr.length == 0),
                }),
            );
            let call = history.call(99, Op::Read { ino });
            let (fh, _) = vfs.open(&Ctx::root(), entry.ino, 0).await.unwrap();
            let size = u32::try_from(CONTENT_LEN * 2).unwrap_or(u32::MAX);
            let bytes = vfs.read(fh, 0, size).await.unwrap();
            let _ = vfs.release(fh).await;
            let content = content::decode(&bytes, CONTENT_LEN)
                .unwrap_or_else(|| panic!("inode {ino} holds bytes no write wrote"));
            history.ret(call, Outcome::Ok(Value::Content(content)));
            state.names.insert(at, InoKey::Real(ino));
            state.files.insert(
                InoKey::Real(ino),
                File {
                    content,
                    mode,
                    nlink,
                },
            );
        }
    }
    state
}
