//! A page of readdirplus on Redis: the directory's record, a page of entries and the
//! records of the inodes they name. The first [`SCRIPT_ROWS`] entries come from one
//! server-side script, pipelined with the names of the whole page: a small directory is
//! one round trip. The rest of a big page is two more pipelined steps of native commands
//! (the entries' values, then the inode records): Redis spends about three times the CPU
//! building a script's reply of thousands of elements as answering the same native
//! commands, and the server's time was most of an `ls -l` of a large directory. Those
//! inode records are read after the entries, as `KvSnapshot::scan_linked` allows.

use redis::{ErrorKind, ServerErrorKind, Value as RedisValue};
use strata_meta::kv::{Key, KvError, Link, LinkedScan, Value};

use crate::{RedisSnapshot, bytes_of, lex_bounds, lex_limit, timed};

/// Entries read by the script; the rest of a page is read natively.
const SCRIPT_ROWS: usize = 32;
/// Keys per `MGET` command of a batched read.
const MGET_BATCH: usize = 1000;

impl RedisSnapshot {
    /// [`KvSnapshot::scan_linked`](strata_meta::kv::KvSnapshot::scan_linked) for
    /// `start < end` and `limit > 0`.
    pub(crate) async fn linked_page(
        &mut self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
    ) -> Result<LinkedScan, KvError> {
        let first = limit.min(SCRIPT_ROWS);
        let (lo, hi) = lex_bounds(start, end);
        let mut script = self.scan_linked.key(&self.index);
        script.arg(&self.base).arg(keys.len());
        for key in keys {
            script.arg(key);
        }
        script.arg(&lo).arg(&hi).arg(lex_limit(first));
        script.arg(link.offset).arg(link.targets.len());
        for (prefix, suffix) in &link.targets {
            script.arg(prefix).arg(suffix);
        }
        let mut pipe = redis::pipe();
        pipe.invoke_script(&script);
        if limit > first {
            pipe.cmd("ZRANGEBYLEX")
                .arg(&self.index)
                .arg(&lo)
                .arg(&hi)
                .arg("LIMIT")
                .arg(0)
                .arg(lex_limit(limit));
        }
        let conn = &mut self.conn;
        let replies: Vec<RedisValue> = self.slot.check(
            timed(async {
                match pipe.query_async(conn).await {
                    // A server that lost its scripts (restarted): load and again.
                    Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                        script.load_async(conn).await?;
                        pipe.query_async(conn).await
                    }
                    other => other,
                }
            })
            .await,
        )?;
        let mut replies = replies.into_iter();
        let mut got = script_rows(replies.next(), keys.len(), link)?;
        let (Some(members), Some((last, _))) = (replies.next(), got.rows.last()) else {
            return Ok(got);
        };
        if got.rows.len() < first {
            return Ok(got);
        }
        // The names after the script's last row: the page continues by name, so a name
        // added or removed among the first ones meanwhile shifts nothing.
        let mut members = members_of(members)?;
        let past = members.partition_point(|m| m <= last);
        members.drain(..past);
        members.truncate(limit.saturating_sub(got.rows.len()));
        let rest = self.linked_rows(members, link).await?;
        got.rows.extend(rest.rows);
        got.linked.extend(rest.linked);
        Ok(got)
    }

    /// The rows of `members` (those that still have a value) and the values they link
    /// to: two pipelined steps.
    async fn linked_rows(&mut self, members: Vec<Key>, link: &Link) -> Result<LinkedScan, KvError> {
        let entry_values = self.mget_batched(members.iter().map(Vec::as_slice)).await?;
        let mut rows = Vec::with_capacity(members.len());
        for (key, value) in members.into_iter().zip(entry_values) {
            // A member without a value: removed between the steps (both change in one
            // commit script), so not an entry any more.
            if let Some(value) = value {
                rows.push((key, value));
            }
        }
        let targets = link.targets_of_rows(&rows);
        let wanted = targets.iter().flatten().flatten().map(Vec::as_slice);
        let linked = link.spread(&targets, self.mget_batched(wanted).await?);
        Ok(LinkedScan {
            values: Vec::new(),
            rows,
            linked,
        })
    }

    fn mget_command<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> redis::Cmd {
        let mut cmd = redis::cmd("MGET");
        for key in keys {
            cmd.arg(self.value_key(key));
        }
        cmd
    }

    /// Values of `keys` (any number): one pipeline of `MGET`s of at most [`MGET_BATCH`]
    /// keys each, so no single command holds the server for long.
    async fn mget_batched<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k [u8]>,
    ) -> Result<Vec<Option<Value>>, KvError> {
        let keys: Vec<&[u8]> = keys.collect();
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for batch in keys.chunks(MGET_BATCH) {
            pipe.add_command(self.mget_command(batch.iter().copied()));
        }
        let replies: Vec<RedisValue> = self
            .slot
            .check(timed(pipe.query_async(&mut self.conn)).await)?;
        let mut out = Vec::with_capacity(keys.len());
        for (reply, batch) in replies.into_iter().zip(keys.chunks(MGET_BATCH)) {
            out.extend(values_of(reply, batch.len())?);
        }
        if out.len() != keys.len() {
            return Err(KvError::Engine(format!(
                "Redis returned {} values for {} keys",
                out.len(),
                keys.len()
            )));
        }
        Ok(out)
    }
}

/// The replies of one `MGET` of `n` keys.
fn values_of(reply: RedisValue, n: usize) -> Result<Vec<Option<Value>>, KvError> {
    let RedisValue::Array(items) = reply else {
        return Err(KvError::Engine(format!("unexpected Redis reply {reply:?}")));
    };
    if items.len() != n {
        return Err(KvError::Engine(format!(
            "Redis returned {} values for {n} keys",
            items.len()
        )));
    }
    items.into_iter().map(bytes_of).collect()
}

/// The members a `ZRANGEBYLEX` returned.
fn members_of(reply: RedisValue) -> Result<Vec<Key>, KvError> {
    let RedisValue::Array(items) = reply else {
        return Err(KvError::Engine(format!("unexpected Redis reply {reply:?}")));
    };
    items
        .into_iter()
        .map(|item| {
            bytes_of(item)?.ok_or_else(|| KvError::Engine("empty Redis index member".into()))
        })
        .collect()
}

/// The script's reply: the `n` keys' values, then per entry its key, its value and the
/// values it links to.
fn script_rows(reply: Option<RedisValue>, n: usize, link: &Link) -> Result<LinkedScan, KvError> {
    let Some(RedisValue::Array(flat)) = reply else {
        return Err(KvError::Engine(format!("unexpected Redis reply {reply:?}")));
    };
    let mut items = flat.into_iter();
    let values = items
        .by_ref()
        .take(n)
        .map(bytes_of)
        .collect::<Result<Vec<_>, _>>()?;
    let mut got = LinkedScan {
        values,
        ..LinkedScan::default()
    };
    while let (Some(k), Some(v)) = (items.next(), items.next()) {
        let linked = items
            .by_ref()
            .take(link.targets.len())
            .map(bytes_of)
            .collect::<Result<Vec<_>, _>>()?;
        // A member without a value cannot happen (both change in one script).
        if let (Some(key), Some(value)) = (bytes_of(k)?, bytes_of(v)?) {
            got.rows.push((key, value));
            got.linked.push(linked);
        }
    }
    Ok(got)
}
