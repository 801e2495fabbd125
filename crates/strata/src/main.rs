//! The `strata` command. Flags follow `juicefs` where the two share a command, so a JuiceFS
//! user feels at home. This is the only place that names concrete backends: META-URL →
//! metadata engine, format record → object store.

mod allocator;
mod bench_cmd;
mod bench_std;
mod cache_node_cmd;
mod client;
mod compact_cmd;
mod control;
mod debug_cmd;
mod dump_cmd;
mod fd_pass;
mod format_cmd;
mod gateway_cmd;
mod gateway_users;
mod hide_args;
mod http_front;
mod identity_args;
mod import_cmd;
mod info_cmd;
mod key_args;
mod listen_handover;
mod maint_cmd;
mod metrics_endpoint;
mod mount_cmd;
mod mount_handover;
mod mount_supervisor;
mod objbench_cmd;
mod populate_cmd;
mod profile_cmd;
mod progress;
mod quota_cmd;
mod stats_cmd;
mod sync_args;
mod sync_cmd;
mod sync_queue;
mod sync_report;
mod sync_time;
mod tier_cmd;
mod trash_cmd;
mod tree_cmd;
mod units;
mod warmup_cmd;
mod webdav_cmd;
mod wiring;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Strata: a distributed POSIX file system for AI and data platforms.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log more: Strata's debug lines (RUST_LOG, when set, decides instead)
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Log errors only, draw no progress bars
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a volume (or update the mutable settings of an existing one).
    Format(format_cmd::FormatArgs),
    /// Mount a volume (foreground by default; -d to run in the background).
    Mount(Box<mount_cmd::MountArgs>),
    /// Unmount a mounted volume.
    Umount(mount_cmd::UmountArgs),
    /// Serve a volume as an S3 endpoint (foreground; SIGTERM or Ctrl-C stops it), or
    /// manage its users (`strata gateway user add|list|remove`).
    Gateway(Box<gateway_cmd::GatewayArgs>),
    /// Serve a volume over WebDAV (foreground; SIGTERM or Ctrl-C stops it). Locks are
    /// kept in the volume: several servers of one volume agree on them.
    Webdav(Box<webdav_cmd::WebDavArgs>),
    /// Show a volume's settings and live sessions.
    Status(format_cmd::StatusArgs),
    /// Show what a file or directory on a mounted volume is made of (inode, slices, objects).
    Info(info_cmd::InfoArgs),
    /// Show a volume's settings, or change the mutable ones (trash days, limits, keys).
    Config(format_cmd::ConfigArgs),
    /// Find objects no file references (leaked) and finish pending deletions; deletes
    /// only with --delete.
    Gc(maint_cmd::GcArgs),
    /// Check that every block of every file exists, that directory usage and link counts
    /// add up, and that every inode record has a name; --repair fixes the counters.
    Fsck(maint_cmd::FsckArgs),
    /// Fill the cache with the blocks of files or trees on a mounted volume before they are
    /// read (--check reports what is cached, --evict drops it); in a cache group each
    /// block goes to its owner.
    Warmup(warmup_cmd::WarmupArgs),
    /// Serve a cache group's blocks without a mount (foreground; SIGTERM or Ctrl-C stops
    /// it): a host with a big cache disk for the group's other members.
    CacheNode(Box<cache_node_cmd::CacheNodeArgs>),
    /// Merge the fragmented chunks of a file or tree on a mounted volume into one slice each.
    Compact(compact_cmd::CompactArgs),
    /// Put deleted files and directories back from the trash to their original paths.
    Restore(trash_cmd::RestoreArgs),
    /// Remove files or directory trees on a mounted volume quickly (through the trash).
    Rmr(trash_cmd::RmrArgs),
    /// Write the volume's metadata as JSON lines (gzip when FILE ends in .gz), or binary.
    Dump(dump_cmd::DumpArgs),
    /// Load a dump into an empty metadata engine (of any kind).
    Load(dump_cmd::LoadArgs),
    /// Take over another file system's volume in place (`strata import juicefs`).
    Import(import_cmd::ImportArgs),
    /// Copy a file or tree on a mounted volume without copying data (slices are shared).
    Clone(tree_cmd::CloneArgs),
    /// Sizes, file and directory counts per subtree (from directory usage records).
    Summary(tree_cmd::SummaryArgs),
    /// Delete a volume: all its objects and all its metadata.
    Destroy(tree_cmd::DestroyArgs),
    /// Limit bytes and inodes of a directory tree, a user or a group.
    Quota(quota_cmd::QuotaArgs),
    /// Place a volume's data across its stores: per-directory policies (set, unset, list),
    /// counts per store (status) and the mover (move). See docs/PLACEMENT.md.
    Tier(tier_cmd::TierArgs),
    /// Benchmarks that run on any directory: `bench DIR` (big and small files, stat: JuiceFS's
    /// workload and flags), `bench meta DIR` (a metadata storm).
    Bench(bench_cmd::BenchArgs),
    /// Measure an object store: big objects a block at a time, small objects put, read,
    /// headed, listed and deleted, with -p requests at once (JuiceFS's objbench).
    Objbench(objbench_cmd::ObjbenchArgs),
    /// Watch a mount live: CPU, memory, FUSE operations and throughput, metadata, block
    /// cache and object store traffic, one row per interval (like `juicefs stats`).
    Stats(stats_cmd::StatsArgs),
    /// Where a mount's time goes: its access log counted by operation, uid and pid
    /// (count, total and mean latency), live from MOUNTPOINT or replayed from a file.
    Profile(profile_cmd::ProfileArgs),
    /// Collect a mount's config, stats, log, thread dump and environment into one archive
    /// for a bug report (secrets removed).
    Debug(debug_cmd::DebugArgs),
    /// Copy a tree between local directories, S3 buckets and Strata volumes and keep the
    /// copies in step (juicefs sync's flags): only what differs is copied.
    Sync(Box<sync_args::SyncArgs>),
    /// Print the version.
    Version,
}

fn main() -> ExitCode {
    hide_args::hide_secrets_from_ps();
    allocator::tune();
    let cli = Cli::parse();
    wiring::set_verbosity(cli.verbose, cli.quiet);
    if !matches!(
        cli.command,
        Command::Mount(_) | Command::Gateway(_) | Command::Webdav(_) | Command::CacheNode(_)
    ) {
        // Servers choose their own default; other commands show warnings and errors.
        wiring::init_logging("warn");
    }
    let outcome = match cli.command {
        Command::Format(a) => format_cmd::run_format(a),
        Command::Mount(a) => mount_cmd::run_mount(*a),
        Command::Umount(a) => mount_cmd::run_umount(a),
        Command::Gateway(a) => gateway_cmd::run_gateway(*a),
        Command::Webdav(a) => webdav_cmd::run_webdav(*a),
        Command::Status(a) => format_cmd::run_status(a),
        Command::Info(a) => info_cmd::run_info(a),
        Command::Config(a) => format_cmd::run_config(a),
        Command::Gc(a) => maint_cmd::run_gc(a),
        Command::Fsck(a) => maint_cmd::run_fsck(a),
        Command::Compact(a) => compact_cmd::run_compact(a),
        Command::Warmup(a) => warmup_cmd::run_warmup(a),
        Command::CacheNode(a) => cache_node_cmd::run_cache_node(*a),
        Command::Restore(a) => trash_cmd::run_restore(a),
        Command::Rmr(a) => trash_cmd::run_rmr(a),
        Command::Dump(a) => dump_cmd::run_dump(a),
        Command::Load(a) => dump_cmd::run_load(a),
        Command::Import(a) => import_cmd::run_import(a),
        Command::Clone(a) => tree_cmd::run_clone(a),
        Command::Summary(a) => tree_cmd::run_summary(a),
        Command::Destroy(a) => tree_cmd::run_destroy(a),
        Command::Quota(a) => quota_cmd::run_quota(a),
        Command::Tier(a) => tier_cmd::run_tier(a),
        Command::Bench(a) => bench_cmd::run_bench(a),
        Command::Objbench(a) => objbench_cmd::run_objbench(a),
        Command::Stats(a) => stats_cmd::run_stats(a),
        Command::Profile(a) => profile_cmd::run_profile(a),
        Command::Debug(a) => debug_cmd::run_debug(a),
        Command::Sync(a) => sync_cmd::run_sync(*a),
        Command::Version => {
            println!("strata {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One clear line, no backtrace.
            eprintln!("strata: {e:#}");
            ExitCode::FAILURE
        }
    }
}
