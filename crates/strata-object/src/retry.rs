//! Timeouts and retries with backoff (`--io-retries`, `--get-timeout`, `--put-timeout`).
//! Each attempt has its own timeout; transient failures (timeouts, server and network
//! errors, corrupt reads) are retried with jittered exponential backoff; missing objects,
//! bad credentials and missing buckets are not.

use std::future::Future;
use std::ops::Range;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use rand::Rng;

use crate::upload::{SmallFirstUpload, Upload};
use crate::{ObjectError, ObjectInfo, ObjectStore, Result};

/// How requests are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first one.
    pub retries: u32,
    pub get_timeout: Duration,
    pub put_timeout: Duration,
    /// First backoff delay; doubles per attempt up to 10 s.
    pub base_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            retries: 10,
            get_timeout: Duration::from_secs(60),
            put_timeout: Duration::from_secs(60),
            base_delay: Duration::from_millis(100),
        }
    }
}

/// Retries transient failures of the wrapped store.
#[derive(Debug)]
pub struct Retrying<S> {
    inner: S,
    policy: RetryPolicy,
}

impl<S: ObjectStore> Retrying<S> {
    pub fn new(inner: S, policy: RetryPolicy) -> Retrying<S> {
        Retrying { inner, policy }
    }

    async fn run<T, F, Fut>(&self, what: &str, timeout: Duration, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<T>> + Send,
    {
        let mut tries = 0u32;
        loop {
            let outcome = match tokio::time::timeout(timeout, attempt()).await {
                Ok(r) => r,
                Err(_) => Err(ObjectError::Timeout(timeout)),
            };
            match outcome {
                Err(e) if e.is_transient() && tries < self.policy.retries => {
                    let delay = self
                        .policy
                        .base_delay
                        .saturating_mul(1 << tries.min(10))
                        .min(Duration::from_secs(10));
                    let delay = delay.mul_f64(rand::rng().random_range(0.5..1.5));
                    tracing::debug!("{what} failed ({e}), retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                    tries += 1;
                }
                other => return other,
            }
        }
    }
}

#[async_trait]
impl<S: ObjectStore> ObjectStore for Retrying<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn cheap_ranges(&self) -> bool {
        self.inner.cheap_ranges()
    }

    fn cheap_ranges_of(&self, key: &str) -> bool {
        self.inner.cheap_ranges_of(key)
    }

    fn range_unit(&self) -> usize {
        self.inner.range_unit()
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes> {
        self.run("get", self.policy.get_timeout, || {
            self.inner.get(key, range.clone())
        })
        .await
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        self.run("put", self.policy.put_timeout, || {
            self.inner.put(key, data.clone())
        })
        .await
    }

    async fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<()> {
        self.run("put", self.policy.put_timeout, || {
            self.inner.put_parts(key, parts.clone())
        })
        .await
    }

    /// Objects that end within their first part go up as one retried put; bigger ones
    /// stream through the inner store's upload, whose part requests are not retried here.
    async fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        crate::check_key(key)?;
        Ok(Box::new(SmallFirstUpload::new(self, &self.inner, key)))
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.run("delete", self.policy.put_timeout, || self.inner.delete(key))
            .await
    }

    /// Never retried: after a failed `fsync` the kernel may report the next one clean
    /// although the data is gone, so a retry could only hide the loss.
    async fn sync(&self) -> Result<u64> {
        self.inner.sync().await
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo> {
        self.run("head", self.policy.get_timeout, || self.inner.head(key))
            .await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ObjectInfo>> {
        self.run("list", self.policy.get_timeout, || {
            self.inner.list(prefix, start_after, limit)
        })
        .await
    }
}
