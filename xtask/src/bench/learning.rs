//! What `rocsync attach`'s `*GetDevice` learning window costs a busy thread: the call mix
//! (20 `hipGetDevice` a step, as PyTorch's device guards make, with 80 us of its own
//! work: ~250 000 `hipGetDevice` a second, and 4 idle threads whose devices an attach
//! cannot learn, as PyTorch's pools) runs on, reporting its
//! progress every 10 ms; rocsync attaches for a few seconds with each window length,
//! interleaved; the steps the mix did not make in those seconds, against its own rate
//! just before, are its lost time. The window's own cost is that less the lost time with
//! no window at all (the capture's traps on the sync calls, the attach itself).

use std::{
    fmt::Write as _,
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
    thread,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::root;

/// The windows compared: the old fixed 2 s, the default, none.
const WINDOWS: [&str; 3] = ["2s", "100ms", "off"];
/// How long the mix runs alone before the attach (its own rate), and how long the
/// attach's seconds are counted.
const BEFORE: Duration = Duration::from_millis(1000);
const COUNTED: Duration = Duration::from_millis(3000);
/// The mix's own work per step: with its 20 `hipGetDevice`, a thread calling it 250 000
/// times a second, as busy PyTorch threads do.
const WORK_NS: u64 = 80_000;

/// Steps made by `t` (ns), interpolated from the mix's progress lines.
fn steps_at(progress: &[(u64, f64)], t: u64) -> Result<f64> {
    let i = progress.partition_point(|&(at, _)| at <= t);
    if i == 0 || i == progress.len() {
        bail!("the mix's progress does not cover the attach");
    }
    let ((t0, s0), (t1, s1)) = (progress[i - 1], progress[i]);
    Ok(s0 + (s1 - s0) * (t - t0) as f64 / (t1 - t0) as f64)
}

/// One attach with `window` to a running mix: milliseconds of the mix's time lost.
fn lost_ms(window: &str, scratch: &std::path::Path) -> Result<f64> {
    let mut mix = Command::new(rocsync_tests::mix())
        .arg(rocsync_tests::sim_hip())
        .arg("1000000000")
        .env("MIX_PROGRESS_MS", "10")
        .env("MIX_WORK_NS", WORK_NS.to_string())
        .env("MIX_IDLE_THREADS", "4")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the mix")?;
    let out = BufReader::new(mix.stdout.take().context("stdout")?);
    let reader = thread::spawn(move || {
        out.lines()
            .map_while(Result::ok)
            .filter_map(|l| {
                let mut w = l.strip_prefix("progress ")?.split(' ');
                Some((
                    w.next()?.parse::<u64>().ok()?,
                    w.next()?.parse::<f64>().ok()?,
                ))
            })
            .collect::<Vec<_>>()
    });
    thread::sleep(BEFORE);
    let attached_at = rocsync_tests::driver::mono_ns();
    let status = Command::new(root().join("target/release/rocsync"))
        .args([
            "attach",
            "--no-status",
            "--force",
            "--duration",
            "2.5",
            "--learn-devices",
            window,
        ])
        .args(["--pid", &mix.id().to_string(), "-o"])
        .arg(scratch.join("learning.json"))
        .stderr(Stdio::null())
        .status()?;
    let end = attached_at + COUNTED.as_nanos() as u64;
    while rocsync_tests::driver::mono_ns() < end + 50_000_000 {
        thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signals the mix this bench started, still running.
    unsafe { libc::kill(mix.id() as i32, libc::SIGKILL) };
    mix.wait()?;
    let progress = reader.join().expect("reader");
    if !status.success() {
        bail!("rocsync attach --learn-devices {window} failed");
    }
    let from = attached_at - (BEFORE.as_nanos() as u64 * 4 / 5);
    let rate = (steps_at(&progress, attached_at)? - steps_at(&progress, from)?)
        / (attached_at - from) as f64;
    let made = steps_at(&progress, end)? - steps_at(&progress, attached_at)?;
    let expected = rate * COUNTED.as_nanos() as f64;
    Ok((expected - made) / rate / 1e6)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

pub(super) fn learning(rounds: usize) -> Result<(String, Value)> {
    let scratch =
        std::env::temp_dir().join(format!("rocsync-bench-learning-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let mut lost: Vec<Vec<f64>> = vec![Vec::new(); WINDOWS.len()];
    for round in 0..rounds {
        eprintln!("xtask: learning window round {}/{rounds}", round + 1);
        for (i, w) in WINDOWS.iter().enumerate() {
            lost[i].push(lost_ms(w, &scratch)?);
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let med: Vec<f64> = lost.iter().map(|v| median(v.clone())).collect();
    let floor = med[WINDOWS.len() - 1];
    let mut md = format!(
        "\nA busy thread (the call mix: 20 `hipGetDevice` and 80 µs of its own work per step, \
         ~250 000 `hipGetDevice` a second as busy PyTorch threads make, and 4 idle threads; \
         simulated runtime) under \
         `rocsync attach --duration 2.5` with each `--learn-devices` window, interleaved, \
         {rounds} rounds: the mix's time lost in the {} s from the attach, against its own \
         rate in the second before (median). The window's cost is that less the lost time \
         with no window (`off`: the attach itself and the traps on the sync calls).\n\n\
         | --learn-devices | lost ms (median) | window's cost, ms | rounds |\n|---|---|---|---|\n",
        COUNTED.as_secs()
    );
    for (i, w) in WINDOWS.iter().enumerate() {
        let rounds: Vec<String> = lost[i].iter().map(|x| format!("{x:.0}")).collect();
        let _ = writeln!(
            md,
            "| {w} | {:.0} | {:.0} | {} |",
            med[i],
            med[i] - floor,
            rounds.join(", ")
        );
    }
    let v = json!({
        "windows": WINDOWS,
        "lost_ms": lost,
        "median_lost_ms": med,
        "counted_s": COUNTED.as_secs_f64(),
    });
    Ok((md, v))
}
