//! A progress line for long steps (`kwb run`'s build, inputs, GPU run, comparison):
//! a spinner on stderr when stderr is a terminal, nothing at all when it is piped or
//! redirected (indicatif hides a bar whose target is not a terminal).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner, and the `kwb_gpu::Progress` that moves it. `finish` clears it.
pub struct Spinner(ProgressBar);

impl Spinner {
    pub fn new() -> Spinner {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Spinner(bar)
    }

    pub fn progress(&self) -> kwb_gpu::Progress {
        let bar = self.0.clone();
        kwb_gpu::Progress::new(move |step| bar.set_message(step.to_owned()))
    }

    pub fn finish(self) {
        self.0.finish_and_clear();
    }
}

impl Default for Spinner {
    fn default() -> Spinner {
        Spinner::new()
    }
}
