//! Progress bars for long commands: a thread that draws a library [`Progress`] (stage,
//! counts, bytes, rate, ETA when the total is known) until the work is done. Nothing is
//! drawn when stderr is not a terminal; the command's summary is printed either way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata_vfs::maintenance::Progress;

/// Draws `progress` while alive; clears the bar when dropped.
#[derive(Debug)]
pub struct ProgressView {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressView {
    pub fn start(progress: Arc<Progress>) -> ProgressView {
        ProgressView::spawn(move |stop| draw(&progress, stop))
    }

    /// A spinner with the text `line()` gives, redrawn as it changes: for commands whose
    /// progress is several counters at once (`sync`).
    pub fn start_line(line: impl Fn() -> String + Send + 'static) -> ProgressView {
        ProgressView::spawn(move |stop| draw_line(&line, stop))
    }

    fn spawn(drawer: impl FnOnce(&AtomicBool) + Send + 'static) -> ProgressView {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            if !crate::wiring::quiet() {
                drawer(&stopping)
            }
        });
        ProgressView {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ProgressView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn draw(progress: &Progress, stop: &AtomicBool) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let counted =
        ProgressStyle::with_template("{msg:28} [{bar:30}] {pos}/{len} {per_sec} ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    let open_ended = ProgressStyle::with_template("{spinner} {msg:28} {pos} {per_sec} {prefix}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let mut stage = String::new();
    while !stop.load(Ordering::Relaxed) {
        let name = progress.stage_name();
        let total = progress.total.load(Ordering::Relaxed);
        if name != stage {
            if !stage.is_empty() {
                bar.println(format!("{stage}: {} done", bar.position()));
            }
            bar.reset();
            stage = name.clone();
            bar.set_message(name);
            if total > 0 {
                bar.set_length(total);
                bar.set_style(counted.clone());
            } else {
                bar.unset_length();
                bar.set_style(open_ended.clone());
            }
        }
        bar.set_position(progress.done.load(Ordering::Relaxed));
        let bytes = progress.bytes.load(Ordering::Relaxed);
        if bytes > 0 {
            bar.set_prefix(format!("{}", HumanBytes(bytes)));
        }
        bar.tick();
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}

fn draw_line(line: &dyn Fn() -> String, stop: &AtomicBool) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    while !stop.load(Ordering::Relaxed) {
        bar.set_message(line());
        bar.tick();
        std::thread::sleep(Duration::from_millis(200));
    }
    bar.finish_and_clear();
}
