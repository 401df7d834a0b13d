//! The supervisor: starts the worker, reads its events, and enforces the timeout.
//! A launch that does not finish within it is a HANG: the worker is examined with
//! cuda-gdb where there is one (every thread's backtrace), then killed, and the
//! supervisor returns; it never waits on a spinning kernel.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::job::Event;

/// How one rung ended on the GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    Done {
        ms: f32,
        reference_ms: Option<f64>,
    },
    Failed {
        stage: String,
        message: String,
    },
    Hang {
        seconds: f64,
        /// `thread apply all bt` of cuda-gdb attached to the worker, when it ran.
        backtrace: Option<String>,
    },
    /// An earlier rung ended the worker.
    NotRun,
}

/// A launch's grid, block and dynamic shared memory.
pub type Config = ([u32; 3], [u32; 3], u64);

/// What the worker did.
#[derive(Debug, Clone, Default)]
pub struct Supervised {
    /// The GPU, with its compute capability.
    pub device: Option<String>,
    /// Per rung: the launch configuration it was given, and how it ended.
    pub rungs: Vec<(Option<Config>, Outcome)>,
    /// A failure before any rung (context, library, job).
    pub failed: Option<(String, String)>,
    /// The operand buffers: (role name, device address, bytes).
    pub buffers: Vec<(String, u64, u64)>,
    /// Each TensorMap parameter's map as first encoded: (parameter, 256 hex characters).
    pub maps: Vec<(String, String)>,
    /// What the worker wrote to stderr.
    pub stderr: String,
}

/// Starts `command` (the worker, given the job file as its last argument), and
/// follows it through `rungs` launches.
pub fn supervise(
    mut command: Command,
    job: &Path,
    rungs: usize,
    timeout: Duration,
) -> std::io::Result<Supervised> {
    let mut child = command
        .arg(job)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        }
    });
    let stderr = child.stderr.take();
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut e) = stderr {
            let _ = e.read_to_string(&mut text);
        }
        text
    });
    let mut s = Supervised {
        rungs: vec![(None, Outcome::NotRun); rungs],
        ..Supervised::default()
    };
    // Loading the library and creating the context can take a while on a cold GPU.
    let startup = timeout.max(Duration::from_secs(120));
    let mut launched: Option<(usize, Instant)> = None;
    let mut killed = false;
    let mut last = Instant::now();
    loop {
        let limit = match launched {
            Some((_, at)) => timeout.saturating_sub(at.elapsed()),
            None => startup.saturating_sub(last.elapsed()),
        };
        match rx.recv_timeout(limit) {
            Ok(line) => {
                last = Instant::now();
                let Ok(event) = serde_json::from_str::<Event>(&line) else {
                    continue;
                };
                match event {
                    Event::Ready { device, sm } => {
                        s.device = Some(format!("{device} (sm_{}{})", sm.0, sm.1));
                    }
                    Event::Launched {
                        rung,
                        grid,
                        block,
                        smem,
                    } => {
                        if let Some(r) = s.rungs.get_mut(rung) {
                            r.0 = Some((grid, block, smem));
                        }
                        launched = Some((rung, Instant::now()));
                    }
                    Event::Done {
                        rung,
                        ms,
                        reference_ms,
                    } => {
                        if let Some(r) = s.rungs.get_mut(rung) {
                            r.1 = Outcome::Done { ms, reference_ms };
                        }
                        launched = None;
                    }
                    Event::Buffers { buffers } => s.buffers = buffers,
                    Event::Map { param, bytes } => s.maps.push((param, bytes)),
                    Event::Failed {
                        rung,
                        stage,
                        message,
                    } => {
                        launched = None;
                        match rung.and_then(|r| s.rungs.get_mut(r)) {
                            Some(r) => r.1 = Outcome::Failed { stage, message },
                            None => s.failed = Some((stage, message)),
                        }
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                match launched {
                    Some((rung, at)) => {
                        let backtrace = backtrace(child.id());
                        if let Some(r) = s.rungs.get_mut(rung) {
                            r.1 = Outcome::Hang {
                                seconds: at.elapsed().as_secs_f64(),
                                backtrace,
                            };
                        }
                    }
                    None => {
                        s.failed = Some((
                            "worker".to_owned(),
                            format!(
                                "the worker said nothing for {} s outside a launch",
                                startup.as_secs()
                            ),
                        ));
                    }
                }
                let _ = child.kill();
                killed = true;
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait()?;
    // After a kill, a grandchild may still hold the pipes: the readers are left to
    // finish on their own rather than waited on.
    if !killed {
        let _ = reader.join();
        s.stderr = stderr_reader.join().unwrap_or_default();
    }
    if !status.success()
        && s.failed.is_none()
        && !s
            .rungs
            .iter()
            .any(|r| !matches!(r.1, Outcome::Done { .. } | Outcome::NotRun))
    {
        s.failed = Some((
            "worker".to_owned(),
            format!("the worker exited with {status}{}", tail(&s.stderr)),
        ));
    }
    Ok(s)
}

fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().rev().take(8).collect();
    if lines.is_empty() {
        String::new()
    } else {
        format!(
            "; its stderr ends:\n{}",
            lines.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    }
}

/// Every thread's backtrace of process `pid` from cuda-gdb, when it is on PATH and
/// answers within a minute.
fn backtrace(pid: u32) -> Option<String> {
    let mut command = Command::new("cuda-gdb");
    command
        .args(["-batch", "-p", &pid.to_string()])
        .args(["-ex", "info cuda kernels", "-ex", "thread apply all bt"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().ok()?;
    let mut out = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    let text = reader.join().ok()?;
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in worker: a shell that prints the events given and then sleeps.
    fn script(lines: &[&str], sleep: u32) -> Command {
        let mut text = String::new();
        for l in lines {
            text.push_str(&format!("echo '{l}'; "));
        }
        text.push_str(&format!("exec sleep {sleep}"));
        let mut c = Command::new("sh");
        c.args(["-c", &text, "worker"]);
        c
    }

    #[test]
    fn a_launch_that_never_finishes_is_a_hang_within_the_timeout() {
        let launched = Event::Launched {
            rung: 0,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            smem: 0,
        }
        .line();
        let started = Instant::now();
        let s = supervise(
            script(&[&launched], 30),
            Path::new("job.json"),
            2,
            Duration::from_millis(500),
        )
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "killed, not waited on"
        );
        assert!(matches!(s.rungs[0].1, Outcome::Hang { seconds, .. } if seconds >= 0.5));
        assert_eq!(s.rungs[0].0, Some(([1, 1, 1], [32, 1, 1], 0)));
        assert_eq!(s.rungs[1].1, Outcome::NotRun);
    }

    #[test]
    fn done_and_failed_events_are_recorded() {
        let lines = [
            Event::Ready {
                device: "X".to_owned(),
                sm: (9, 0),
            }
            .line(),
            Event::Launched {
                rung: 0,
                grid: [2, 1, 1],
                block: [64, 1, 1],
                smem: 0,
            }
            .line(),
            Event::Done {
                rung: 0,
                ms: 1.5,
                reference_ms: None,
            }
            .line(),
            Event::Failed {
                rung: Some(1),
                stage: "launch".to_owned(),
                message: "kwb_launch returned 9".to_owned(),
            }
            .line(),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let s = supervise(script(&refs, 0), Path::new("j"), 2, Duration::from_secs(5)).unwrap();
        assert_eq!(s.device.as_deref(), Some("X (sm_90)"));
        assert_eq!(
            s.rungs[0].1,
            Outcome::Done {
                ms: 1.5,
                reference_ms: None
            }
        );
        assert!(matches!(&s.rungs[1].1, Outcome::Failed { stage, .. } if stage == "launch"));
        assert!(s.failed.is_none());
    }

    #[test]
    fn buffer_and_map_events_are_collected() {
        let map = "ab".repeat(128);
        let lines = [
            Event::Buffers {
                buffers: vec![("A".to_owned(), 0x1000, 512), ("B".to_owned(), 0x2000, 256)],
            }
            .line(),
            Event::Map {
                param: "tmap_a".to_owned(),
                bytes: map.clone(),
            }
            .line(),
            Event::Done {
                rung: 0,
                ms: 1.0,
                reference_ms: None,
            }
            .line(),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let s = supervise(script(&refs, 0), Path::new("j"), 1, Duration::from_secs(5)).unwrap();
        assert_eq!(
            s.buffers,
            vec![("A".to_owned(), 0x1000, 512), ("B".to_owned(), 0x2000, 256)]
        );
        assert_eq!(s.maps, vec![("tmap_a".to_owned(), map)]);
        assert!(matches!(s.rungs[0].1, Outcome::Done { .. }));
    }
}
