//! Loads by `COPY` (`src/bulk.rs`) on the server named by `STRATA_TEST_POSTGRES`: a load
//! that fails half way leaves the table empty and keyed as before, rows repeating a key
//! load nothing, and a table that holds rows is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;

use strata_meta::conformance::{test_format, test_options, touch};
use strata_meta::kv::KvEngine;
use strata_meta::{BinaryDumpOptions, Meta};
use strata_meta_postgres::{PostgresEngine, PostgresUrl};
use strata_types::Ino;

fn fresh_url() -> PostgresUrl {
    let server = std::env::var("STRATA_TEST_POSTGRES")
        .expect("STRATA_TEST_POSTGRES must name a database (scripts/test.sh starts one)");
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let sep = if server.contains('?') { '&' } else { '?' };
    PostgresUrl::parse(&format!("{server}{sep}prefix={prefix}")).unwrap()
}

async fn engine(url: &PostgresUrl) -> Arc<dyn KvEngine> {
    Arc::new(PostgresEngine::connect(url).await.unwrap())
}

fn row(key: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
    (key.as_bytes().to_vec(), value.as_bytes().to_vec())
}

/// The table's row count and whether it has its primary key, asked directly.
async fn table_state(url: &PostgresUrl) -> (i64, bool) {
    let (client, conn) = tokio_postgres::connect(url.conninfo.expose(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let table = url.table();
    let rows: i64 = client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0);
    let keys: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = $1::text::regclass \
             AND contype = 'p'",
            &[&table],
        )
        .await
        .unwrap()
        .get(0);
    (rows, keys == 1)
}

/// A binary dump of a volume of `files` files.
async fn dump_of_files(files: usize) -> Vec<u8> {
    let source = engine(&fresh_url()).await;
    let meta = Meta::new(source, test_options());
    meta.format(&test_format(0), false).await.unwrap();
    meta.load().await.unwrap();
    for i in 0..files {
        touch(&meta, Ino::ROOT, &format!("f{i}")).await;
    }
    meta.flush_usage().await.unwrap();
    let mut out = Vec::new();
    let opts = BinaryDumpOptions {
        threads: 2,
        keep_secret_key: false,
        one_moment: true,
    };
    meta.dump_binary(&mut out, &opts, &mut |_| {})
        .await
        .unwrap();
    out
}

#[tokio::test]
async fn a_load_cut_off_half_way_leaves_the_table_empty_and_keyed() {
    let dump = dump_of_files(3000).await;
    let url = fresh_url();
    let loading = Meta::new(engine(&url).await, test_options());
    // Past the first batches' rows: the COPY has taken some before the cut shows.
    let cut = &dump[..dump.len() * 2 / 3];
    let err = loading
        .load_binary(&mut std::io::Cursor::new(cut), 4, &mut |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("binary dump"), "{err}");
    assert_eq!(
        table_state(&url).await,
        (0, true),
        "nothing loaded, key back"
    );
    // Nothing to erase first: the whole dump loads as it is.
    let stats = loading
        .load_binary(&mut std::io::Cursor::new(&dump), 4, &mut |_| {})
        .await
        .unwrap();
    assert!(stats.nodes >= 3001, "root and the files: {stats:?}");
    loading.load().await.unwrap();
    assert_eq!(loading.statfs().await.unwrap().used_inodes, 3000);
    let (rows, keyed) = table_state(&url).await;
    assert!(rows > 3000 && keyed, "{rows} rows, keyed {keyed}");
}

#[tokio::test]
async fn rows_that_repeat_a_key_load_nothing() {
    let url = fresh_url();
    let engine = engine(&url).await;
    let mut writer = engine.bulk_writer().await.unwrap().expect("a COPY writer");
    writer
        .put(vec![row("a", "1"), row("b", "2")])
        .await
        .unwrap();
    writer.put(vec![row("a", "3")]).await.unwrap();
    let err = writer.finish().await.unwrap_err();
    assert!(err.to_string().contains("repeat a key"), "{err}");
    assert_eq!(table_state(&url).await, (0, true));
}

#[tokio::test]
async fn a_table_holding_rows_is_refused_and_kept() {
    let url = fresh_url();
    let engine = engine(&url).await;
    let mut writer = engine.bulk_writer().await.unwrap().expect("a COPY writer");
    writer.put(vec![row("k", "v")]).await.unwrap();
    writer.finish().await.unwrap();
    assert_eq!(table_state(&url).await, (1, true), "the row committed");
    let err = match engine.bulk_writer().await {
        Ok(_) => panic!("a second load into a table holding rows started"),
        Err(e) => e,
    };
    assert!(err.to_string().contains("already holds rows"), "{err}");
    assert_eq!(table_state(&url).await, (1, true), "the row kept");
}
