//! Lost commit answers, the same cases on every network engine: a commit reaches the
//! server, the server acts (or refuses), and the answer never comes back because the
//! connection breaks. The engine must then tell the truth: `Ok` exactly when the commit
//! was applied; a retryable error (`Unavailable` or `Conflict`) exactly when it was not,
//! so the transaction layer's retry cannot apply it twice (a `create` that happened
//! must not come back `EEXIST`).
//!
//! The engine under test reaches its server through a fault proxy the test drives
//! through [`AnswerCutter`]; a second engine on a direct connection says what happened.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kv::{CommitRequest, KvEngine, KvError, ReadCheck, Write};

/// What the lost-answer cases need of a fault proxy.
pub trait AnswerCutter: Send + Sync {
    /// Discard every answer from now on (requests still reach the server).
    fn cut_answers(&self);
    /// Forward everything again.
    fn pass(&self);
    /// Reset every open connection.
    fn reset_all(&self);
    /// Bytes discarded so far.
    fn discarded(&self) -> u64;
    /// Lose the answer to the next request containing `pattern` (any request when
    /// empty): forward it, discard the answer, reset the connection.
    fn lose_next_answer(&self, pattern: &[u8]);
    /// Forget an armed [`AnswerCutter::lose_next_answer`] that found no request.
    fn disarm(&self);
    /// Answers lost so far by [`AnswerCutter::lose_next_answer`].
    fn lost_answers(&self) -> u64;
}

/// A commit that creates `key` = `value` if it does not exist.
pub fn create(key: &[u8], value: &[u8]) -> CommitRequest {
    CommitRequest {
        seq: 0,
        reads: vec![ReadCheck::Point {
            key: key.to_vec(),
            value: None,
        }],
        writes: vec![(key.to_vec(), Write::Put(value.to_vec()))],
    }
}

async fn wait_for(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !condition().await {
        assert!(started.elapsed() < Duration::from_secs(20), "{what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn value_of(direct: &dyn KvEngine, key: &[u8]) -> Option<Vec<u8>> {
    let mut snap = direct.snapshot().await.unwrap();
    snap.get(key).await.unwrap()
}

/// Run `req` through the proxy while answers are cut; once the server has answered (and
/// `visible` holds on the direct connection), reset the connection.
async fn commit_with_cut_answer(
    engine: Arc<dyn KvEngine>,
    direct: &dyn KvEngine,
    cutter: &dyn AnswerCutter,
    req: CommitRequest,
    visible: Option<(&[u8], &[u8])>,
) -> Result<(), KvError> {
    let before = cutter.discarded();
    cutter.cut_answers();
    let commit = tokio::spawn(async move { engine.commit(req).await });
    wait_for("the server answers", async || cutter.discarded() > before).await;
    if let Some((key, value)) = visible {
        wait_for("the commit is applied", async || {
            value_of(direct, key).await.as_deref() == Some(value)
        })
        .await;
    }
    cutter.reset_all();
    cutter.pass();
    commit.await.unwrap()
}

/// The cases. `engine` goes through `cutter`'s proxy, `direct` does not; both see one
/// empty key space.
pub async fn run(engine: Arc<dyn KvEngine>, direct: Arc<dyn KvEngine>, cutter: &dyn AnswerCutter) {
    engine.commit(create(b"a", b"1")).await.unwrap();

    // Applied, answer lost: reported as applied (a blind retry would find "b" and conflict).
    let applied = commit_with_cut_answer(
        engine.clone(),
        &*direct,
        cutter,
        create(b"b", b"2"),
        Some((b"b", b"2")),
    )
    .await;
    assert!(
        applied.is_ok(),
        "an applied commit was not reported: {applied:?}"
    );

    // Refused (its check fails: "a" exists), answer lost: not reported as applied.
    let refused =
        commit_with_cut_answer(engine.clone(), &*direct, cutter, create(b"a", b"3"), None).await;
    assert!(
        matches!(refused, Err(KvError::Unavailable(_) | KvError::Conflict)),
        "a refused commit: {refused:?}"
    );
    assert_eq!(value_of(&*direct, b"a").await.as_deref(), Some(&b"1"[..]));

    // The engine still works after both.
    engine.commit(create(b"c", b"4")).await.unwrap();
}

/// Lose the answer of one request in each of `rounds` commits (at the request matching
/// `pattern`, so anywhere in a commit's exchange), and check each verdict against what
/// the direct connection sees. Returns (verdicts "applied", verdicts "not applied").
pub async fn verdicts_match_reality(
    engine: Arc<dyn KvEngine>,
    direct: Arc<dyn KvEngine>,
    cutter: &dyn AnswerCutter,
    pattern: &[u8],
    rounds: usize,
) -> (usize, usize) {
    let (mut applied, mut not_applied) = (0, 0);
    for round in 0..rounds {
        let key = format!("v{round:04}").into_bytes();
        let lost_before = cutter.lost_answers();
        cutter.lose_next_answer(pattern);
        let verdict = engine.commit(create(&key, b"x")).await;
        let present = value_of(&*direct, &key).await.is_some();
        match &verdict {
            Ok(()) => {
                assert!(present, "round {round}: reported applied, but it was not");
                applied += 1;
            }
            Err(KvError::Unavailable(_) | KvError::Conflict) => {
                assert!(
                    !present,
                    "round {round}: reported not applied, but it was: {verdict:?}"
                );
                not_applied += 1;
            }
            Err(e) => panic!("round {round}: the server was reachable, yet: {e}"),
        }
        // An arming this commit did not use must not hit the next one.
        if cutter.lost_answers() == lost_before {
            cutter.disarm();
        }
    }
    (applied, not_applied)
}

/// Implement [`AnswerCutter`] for a newtype `$t(strata_testkit::proxy::FaultProxy)` in an
/// engine's test crate (which has the test kit; this crate does not depend on it).
#[macro_export]
macro_rules! answer_cutter_for_fault_proxy {
    ($t:ty) => {
        impl $crate::conformance::lost_answers::AnswerCutter for $t {
            fn cut_answers(&self) {
                self.0.set(strata_testkit::proxy::Fault::CutAnswers);
            }
            fn pass(&self) {
                self.0.set(strata_testkit::proxy::Fault::Pass);
            }
            fn reset_all(&self) {
                self.0.reset_all();
            }
            fn discarded(&self) -> u64 {
                self.0.counts().discarded
            }
            fn lose_next_answer(&self, pattern: &[u8]) {
                self.0.lose_answers(1, pattern);
            }
            fn disarm(&self) {
                self.0.lose_answers(0, b"");
            }
            fn lost_answers(&self) -> u64 {
                self.0.counts().lost_answers
            }
        }
    };
}

/// The lost-answer tests of one engine: `$engines` is an async fn returning (engine
/// through the proxy, engine on a direct connection, cutter); `$pattern` marks the
/// requests whose answers the verdict test loses (`b""`: any request).
#[macro_export]
macro_rules! lost_answer_tests {
    ($engines:path, $pattern:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_commit_whose_answer_is_lost_is_settled_not_retried() {
            let (engine, direct, cutter) = $engines().await;
            $crate::conformance::lost_answers::run(engine, direct, &cutter).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn every_verdict_after_a_lost_answer_matches_what_the_server_did() {
            use $crate::conformance::lost_answers::AnswerCutter;
            let (engine, direct, cutter) = $engines().await;
            let rounds = 30;
            let (applied, not_applied) = $crate::conformance::lost_answers::verdicts_match_reality(
                engine, direct, &cutter, $pattern, rounds,
            )
            .await;
            assert_eq!(applied + not_applied, rounds);
            let lost = usize::try_from(cutter.lost_answers()).unwrap();
            assert!(lost >= rounds / 2, "only {lost} answers were lost");
        }
    };
}
