//! `strata sync`'s flags (those of `juicefs sync`) and how they read.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::units;
use strata_sync::open::OpenHow;

#[derive(Debug, Args)]
#[command(after_help = "ADDRESSES (SRC and DST):
  /path, ./path, file:///path      a local directory
  s3://[AK:SK[:TOKEN]@]BUCKET[.ENDPOINT][/PREFIX]
                                   an S3 bucket (AWS when ENDPOINT is left out; credentials
                                   also from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
  minio://[AK:SK@]HOST:PORT/BUCKET[/PREFIX]
                                   an S3-compatible server over http, path-style
  wasb://[ACCOUNT:KEY@]CONTAINER[.ENDPOINT][/PREFIX]
                                   an Azure Blob Storage container (ENDPOINT default
                                   core.windows.net; HOST:PORT is Azurite over http);
                                   also azure://
  strata://NAME/PATH               a Strata volume, opened without a mount; the environment
                                   variable NAME holds its META-URL (as juicefs's jfs://)

An address ending in '/' is a directory: SRC's tree is copied into DST's. Without the
'/', SRC may also name one file (DST is then the file to write, or a directory to put
it in) or, when nothing has that name, a key prefix: `strata sync ./te ./ab` copies
test/a to abst/a and text to abxt. Rules are tried in the order given, the first match
decides (see docs/SYNC.md).

MANY HOSTS:
  strata sync --queue META-URL SRC DST      list, queue the work as tasks in META-URL's
                                            engine (redis://, postgres://, etcd://,
                                            sqlite3://), and work on them too
  strata sync --worker --queue META-URL     on any number of hosts: take tasks until the
                                            job is done (SRC and DST come from the job)")]
pub struct SyncArgs {
    /// Where to copy from
    #[arg(required_unless_present = "worker")]
    pub src: Option<String>,
    /// Where to copy to
    #[arg(required_unless_present = "worker")]
    pub dst: Option<String>,
    /// Copy keys matching PATTERN even if a later --exclude matches (order matters)
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<String>,
    /// Leave out keys matching PATTERN (order matters)
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// Match rules against whole keys once, instead of level by level like rsync
    #[arg(long)]
    pub match_full_path: bool,
    /// Only files at least this big: 1K, 10M, 1G (a plain number is bytes)
    #[arg(long, value_parser = bytes)]
    pub min_size: Option<u64>,
    /// Only files at most this big
    #[arg(long, value_parser = bytes)]
    pub max_size: Option<u64>,
    /// Only files modified at least this long ago: 30s, 10m, 2h, 7d
    #[arg(long, value_parser = units::parse_duration)]
    pub min_age: Option<Duration>,
    /// Only files modified at most this long ago
    #[arg(long, value_parser = units::parse_duration)]
    pub max_age: Option<Duration>,
    /// Only files modified at or after TIME: "2006-01-02 15:04:05" (local time), or with
    /// an offset ("... +08:00", "...Z")
    #[arg(long, value_name = "TIME", value_parser = crate::sync_time::parse_time)]
    pub start_time: Option<i64>,
    /// Only files modified at or before TIME
    #[arg(long, value_name = "TIME", value_parser = crate::sync_time::parse_time)]
    pub end_time: Option<i64>,
    /// The first key to sync (keys before it are neither copied nor deleted)
    #[arg(short, long, value_name = "KEY")]
    pub start: Option<String>,
    /// The last key to sync
    #[arg(short, long, value_name = "KEY")]
    pub end: Option<String>,
    /// Look at no more than N source keys, in key order (-1: all)
    #[arg(long, value_name = "N", default_value_t = -1, allow_negative_numbers = true, value_parser = clap::value_parser!(i64).range(-1..))]
    pub limit: i64,
    /// Copy a file the destination has when the source's is newer (skip it when older)
    #[arg(short, long)]
    pub update: bool,
    /// Copy every file, whatever the destination has
    #[arg(short, long)]
    pub force_update: bool,
    /// Only update files the destination has; copy no new ones
    #[arg(long)]
    pub existing: bool,
    /// Leave alone every file the destination has
    #[arg(long)]
    pub ignore_existing: bool,
    /// Make directories, empty ones too (where the destination has directories)
    #[arg(long)]
    pub dirs: bool,
    /// Keep mode, owner, group and POSIX access control lists (where both sides have them)
    #[arg(long)]
    pub perms: bool,
    /// Copy symlinks as symlinks (without it, what they point to is copied)
    #[arg(short, long)]
    pub links: bool,
    /// Delete each source file once the destination has it
    #[arg(long)]
    pub delete_src: bool,
    /// Delete destination files the source does not have
    #[arg(long)]
    pub delete_dst: bool,
    /// Read back every new copy and compare it with its source
    #[arg(long)]
    pub check_new: bool,
    /// Compare the contents of files whose sizes agree, and copy those that differ
    #[arg(long)]
    pub check_all: bool,
    /// Look at each copied file's source again after the copy: one that changed
    /// meanwhile (size or modification time) fails, to be copied again by the next run
    #[arg(long)]
    pub check_change: bool,
    /// Print what would be done (one line per key on stdout), do nothing
    #[arg(long)]
    pub dry: bool,
    /// Files copied at once
    #[arg(short = 'p', long, default_value_t = 10)]
    pub threads: usize,
    /// Directories read at once while listing a local directory or a volume, ahead of
    /// the walk (object stores list one page after another; JuiceFS's default is 1)
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub list_threads: u64,
    /// Bandwidth limit in Mbps (0: none)
    #[arg(long, default_value_t = 0)]
    pub bwlimit: u64,
    /// Only the keys listed in FILE, one per line (a line ending in / stands for a directory)
    #[arg(long, value_name = "FILE")]
    pub files_from: Option<PathBuf>,
    /// Stop at the first key that fails (by default the run goes on and fails at the end)
    #[arg(long)]
    pub fail_fast: bool,
    /// Stop once more than N keys failed (-1: never)
    #[arg(long, value_name = "N", default_value_t = -1, allow_negative_numbers = true, value_parser = clap::value_parser!(i64).range(-1..))]
    pub max_failure: i64,
    /// Reach s3:// endpoints over http (minio:// addresses always use http)
    #[arg(long)]
    pub no_https: bool,
    /// Share the run with workers on other hosts through tasks kept in this metadata engine
    /// (the job's addresses, credentials included, are stored there)
    #[arg(long, value_name = "META-URL")]
    pub queue: Option<String>,
    /// Work on the job in --queue (started by `strata sync --queue META-URL SRC DST`)
    /// until it is done
    #[arg(long, requires = "queue")]
    pub worker: bool,
    /// With --queue: how long a worker that stops answering keeps its tasks before
    /// others take them over
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration, default_value = "30s")]
    pub lease: Duration,
}

fn bytes(text: &str) -> Result<u64, String> {
    units::parse_size(text, 1)
}

impl From<&SyncArgs> for OpenHow {
    fn from(a: &SyncArgs) -> OpenHow {
        OpenHow {
            links: a.links,
            acls: a.perms,
            threads: a.threads.max(1),
            list_threads: usize::try_from(a.list_threads).unwrap_or(1),
            no_https: a.no_https,
            reveal: crate::hide_args::revealed_address_secret,
        }
    }
}
