//! The metadata conformance suite, written once and run against every engine.
//!
//! An engine crate implements [`TestStore`] for a fresh, empty store of its kind and calls
//! [`meta_conformance_tests!`](crate::meta_conformance_tests) in an integration test; every
//! case becomes its own `#[tokio::test]`. Cases cover the `Kv` contract (ordering, limits,
//! conflicts, field updates), every metadata operation with its errno cases, and several
//! clients racing on one store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

pub mod acl;
pub mod clients;
pub mod data;
pub mod dump_binary;
pub mod kv;
pub mod lifecycle;
pub mod lost_answers;
pub mod namespace;
pub mod placement;
pub mod posix;
pub mod protection;
pub mod remove;
pub mod round_trips;
pub mod special;

use std::sync::Arc;

use strata_types::{Errno, FileType, Ino};

use crate::format::{Format, META_VERSION};
use crate::kv::KvEngine;
use crate::meta::{Ctx, Entry, Meta, MetaOptions};

/// A store for one test: created empty, opened by as many clients as the test wants.
pub trait TestStore: Send + Sync + Sized + 'static {
    /// A new, empty store.
    fn create() -> Self;
    /// A new client handle on this store (its own connections, as another process
    /// would have).
    fn client(&self) -> Arc<dyn KvEngine>;
}

/// The memory engine as a test store (clients share one map).
#[derive(Debug, Default)]
pub struct MemoryStore(crate::kv::memory::MemoryEngine);

impl TestStore for MemoryStore {
    fn create() -> Self {
        MemoryStore::default()
    }
    fn client(&self) -> Arc<dyn KvEngine> {
        Arc::new(self.0.clone())
    }
}

/// A SQLite database file in a temporary directory.
#[derive(Debug)]
pub struct SqliteStore {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl TestStore for SqliteStore {
    fn create() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("meta.db");
        SqliteStore { _dir: dir, path }
    }
    fn client(&self) -> Arc<dyn KvEngine> {
        Arc::new(crate::kv::sqlite::SqliteEngine::open(&self.path).expect("open sqlite"))
    }
}

/// Settings of a test volume.
pub fn test_format(trash_days: u32) -> Format {
    Format {
        name: "conformance".into(),
        uuid: "00000000-0000-4000-8000-000000000000".into(),
        storage: "mem".into(),
        bucket: "test".into(),
        access_key: None,
        secret_key: None,
        session_token: None,
        block_size_kib: 4096,
        compression: "none".into(),
        trash_days,
        capacity: 0,
        inodes: 0,
        created_at: 1_700_000_000,
        meta_version: META_VERSION,
        enable_acl: true,
        encryption: None,
        foreign: None,
        stores: Vec::new(),
    }
}

/// Options for test clients: small id batches so batching paths run; syncs deferred, as
/// on a mount.
pub fn test_options() -> MetaOptions {
    MetaOptions {
        deferred_sync: true,
        inode_batch: 16,
        slice_batch: 16,
        compact_threshold: 8,
        ..MetaOptions::default()
    }
}

/// A formatted volume (no trash) and its first client.
pub async fn volume<S: TestStore>(store: &S) -> Meta {
    volume_with(store, test_format(0)).await
}

/// A volume formatted with `format`, and its first client.
pub async fn volume_with<S: TestStore>(store: &S, format: Format) -> Meta {
    let meta = Meta::new(store.client(), test_options());
    meta.format(&format, false).await.expect("format");
    meta.load().await.expect("load");
    following(meta).await
}

/// Another client of an already formatted store.
pub async fn client<S: TestStore>(store: &S) -> Meta {
    let meta = Meta::new(store.client(), test_options());
    meta.load().await.expect("load");
    following(meta).await
}

/// `meta`, following the engine's change feed (where it has one) with its cache
/// trusted, as a mount runs: every case runs with the metadata cache on.
pub async fn following(meta: Meta) -> Meta {
    meta.start_following(tokio_util::sync::CancellationToken::new());
    assert!(
        meta.wait_for_feed(std::time::Duration::from_secs(10)).await,
        "the change feed came up"
    );
    meta
}

/// The errno of a failed result; panics (failing the test) on success.
pub fn errno_of<T: std::fmt::Debug>(r: crate::Result<T>) -> Errno {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e.errno(),
    }
}

/// A whole slice record of `len` bytes at the start of a chunk.
pub fn slice(id: u64, len: u32) -> strata_types::Slice {
    strata_types::Slice {
        pos: 0,
        id,
        size: len,
        off: 0,
        len,
    }
}

/// Create a regular file as root.
pub async fn touch(meta: &Meta, parent: Ino, name: &str) -> Entry {
    meta.mknod(
        &Ctx::root(),
        parent,
        name.as_bytes(),
        FileType::Regular,
        0o644,
        0,
    )
    .await
    .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

/// Create a directory as root.
pub async fn mkdir(meta: &Meta, parent: Ino, name: &str) -> Entry {
    meta.mkdir(&Ctx::root(), parent, name.as_bytes(), 0o755)
        .await
        .unwrap_or_else(|e| panic!("mkdir {name}: {e}"))
}

/// Names in a directory, in order.
pub async fn names(meta: &Meta, dir: Ino) -> Vec<String> {
    let entries = meta
        .readdir(dir, None, usize::MAX, false)
        .await
        .expect("readdir");
    entries
        .into_iter()
        .map(|e| String::from_utf8_lossy(&e.name).into_owned())
        .collect()
}

/// Expand to one `#[tokio::test]` per conformance case for the store type given.
#[macro_export]
macro_rules! meta_conformance_tests {
    ($store:ty) => {
        $crate::meta_conformance_tests!(@cases $store;
            kv::point_ops, kv::scan_order_and_limits, kv::read_your_writes, kv::conflicts_are_detected,
            kv::field_updates_commute, kv::retry_loop_gives_up, kv::deferred_commits_and_sync,
            kv::linked_reads_follow_a_number, kv::frozen_views_hold_one_moment,
            namespace::format_rules, namespace::create_and_lookup, namespace::name_limits,
            namespace::symlinks, namespace::unlink_rules, namespace::rmdir_rules,
            namespace::rename_rules, namespace::rename_exchange_and_noreplace,
            namespace::hard_links, namespace::readdir_pages, namespace::trash_keeps_deleted_files,
            namespace::dir_usage_is_kept, namespace::corrupt_values_name_their_key,
            posix::setattr_rules, posix::access_rules, posix::sticky_directories,
            posix::xattr_rules, posix::statfs_and_limits,
            acl::access_lists_grant_and_chmod_moves_the_mask,
            acl::lists_are_checked_where_linux_checks_them,
            acl::new_entries_inherit_the_default_list, acl::identical_lists_share_one_record,
            acl::lists_survive_dump_and_load, acl::lists_survive_the_trash,
            acl::volumes_without_lists_refuse_them,
            protection::immutable_files_refuse_every_change,
            protection::append_only_files_take_appends_only,
            protection::immutable_directories_keep_their_entries,
            protection::object_locks_hold_until_they_end,
            protection::the_version_keeper_moves_locked_names_but_keeps_one,
            protection::protections_survive_dump_load_the_trash_and_rmr,
            data::write_and_read_chunks, data::slice_cap_is_enforced, data::truncate_clips_and_frees,
            data::fallocate_modes, data::copy_file_range_shares_slices, data::compaction_support,
            data::deletion_queues,
            clients::sustained_files, clients::stale_sessions_are_cleaned,
            clients::a_session_is_taken_over_with_its_locks_and_open_files,
            clients::stale_session_cleaning_is_shared, clients::flocks_conflict,
            clients::posix_locks_conflict, clients::concurrent_creates, clients::concurrent_renames,
            clients::lookups_answer_one_state,
            lifecycle::scans_see_every_chunk_and_queued_slice,
            lifecycle::namespace_check_finds_and_repairs_counters,
            lifecycle::namespace_walk_reaches_every_inode_record,
            lifecycle::trash_restore_and_purge, lifecycle::remove_tree_goes_through_the_trash,
            lifecycle::dump_and_load_round_trip, lifecycle::dump_of_a_subdir_becomes_a_volume,
            lifecycle::quotas_limit_and_count, lifecycle::subdir_dumps_never_undercount_shared_slices,
            lifecycle::populated_volumes_check_clean,
            dump_binary::binary_dumps_round_trip, dump_binary::damaged_binary_dumps_are_refused,
            dump_binary::binary_dumps_leave_out_what_only_sessions_keep,
            dump_binary::leftovers_of_an_interrupted_load_are_erased_on_request,
            placement::placement_records_switch_atomically_and_go_with_their_slice,
            placement::tier_policies_and_mover_leases,
            placement::placements_survive_binary_dumps_and_reformatting,
            special::tmpfiles_live_until_closed_or_linked,
            special::rename_whiteout_leaves_a_char_device,
            special::open_directories_outlive_their_removal,
            special::data_commits_never_override_later_times,
            special::remove_tree_checks_what_rm_r_checks,
            remove::many_removals_at_once_leave_the_counters_right,
            remove::skipping_the_trash_is_for_root, remove::an_error_stops_the_walk_and_is_returned,
            remove::hard_links_in_one_batch_keep_the_counts_right, remove::files_go_in_batches,
            round_trips::listing_and_changes_are_one_call_each,
            round_trips::stale_assumptions_are_caught,
            round_trips::unchanged_lookups_cost_nothing,
            round_trips::a_cached_entry_of_a_removed_file_is_not_corruption,
            round_trips::records_a_commit_changed_are_known,
            round_trips::unchanged_listings_read_no_entries,
            round_trips::read_opens_use_the_open_cache,
            round_trips::own_new_directories_are_listed_from_the_cache,
            round_trips::list_checks_cost_what_mode_checks_cost
        );
    };
    (@cases $store:ty; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                $crate::conformance::$module::$case::<$store>().await;
            }
        )*
    };
}
