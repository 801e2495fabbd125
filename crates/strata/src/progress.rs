//! Progress bars for long commands: a thread that draws a library [`Progress`] (stage,
//! counts, bytes, rate, ETA when the total is known) until the work is done. Nothing is
//! drawn when stderr is not a terminal; the command's summary is printed either way.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata_vfs::maintenance::Progress;

/// Draws `progress` while alive; clears the bar when dropped.
#[derive(Debug)]
pub struct ProgressView {
    /// Dropped to stop the drawer at once (it waits on the other end between redraws).
    stop: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The drawer's side of the stop signal.
struct Stop(Receiver<()>);

impl Stop {
    /// Wait up to `pause`; true once the view was dropped.
    fn after(&self, pause: Duration) -> bool {
        !matches!(self.0.recv_timeout(pause), Err(RecvTimeoutError::Timeout))
    }
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

    fn spawn(drawer: impl FnOnce(&Stop) + Send + 'static) -> ProgressView {
        let (stop, stopping) = channel();
        let thread = std::thread::spawn(move || {
            if !crate::wiring::quiet() {
                drawer(&Stop(stopping))
            }
        });
        ProgressView {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ProgressView {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn draw(progress: &Progress, stop: &Stop) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let counted =
        ProgressStyle::with_template("{msg:28} [{bar:30}] {pos}/{len} {per_sec} ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    let open_ended = ProgressStyle::with_template("{spinner} {msg:28} {pos} {per_sec} {prefix}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let mut stage = String::new();
    loop {
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
        if stop.after(Duration::from_millis(100)) {
            break;
        }
    }
    bar.finish_and_clear();
}

fn draw_line(line: &dyn Fn() -> String, stop: &Stop) {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    loop {
        bar.set_message(line());
        bar.tick();
        if stop.after(Duration::from_millis(200)) {
            break;
        }
    }
    bar.finish_and_clear();
}
