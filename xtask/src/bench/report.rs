//! The results of `cargo xtask bench` as bench/results.json and bench/RESULTS.md: the
//! tables a reader sees, and the machine and commit they were measured on.

use std::{fmt::Write as _, process::Command};

use anyhow::Result;
use serde_json::{Value, json};

use super::{Case, ROUNDS, SideBySide, quartiles, stats};
use crate::root;

pub(super) fn report(
    cases: &[Case],
    (results, pooled): (&[Vec<Vec<f64>>], &[SideBySide]),
    threads: &[(&str, Value)],
    pipeline: &[(bool, Vec<f64>, Value)],
    (extra_md, extra_json): (String, Value),
) -> Result<()> {
    let sh = |cmd: &str| {
        Command::new("sh")
            .args(["-c", cmd])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let machine = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2");
    let kernel = sh("uname -r");
    let commit = sh("git rev-parse --short HEAD; git diff --quiet -- . ':!bench' || echo '(with local changes)'")
        .replace('\n', " ");
    let date = sh("date -u +%Y-%m-%dT%H:%MZ");
    let mut md = String::new();
    let _ = writeln!(md, "# rocsync benchmarks\n");
    let _ = writeln!(
        md,
        "Machine: {machine}, {} cores; kernel {kernel}; commit {commit}; {date}. `cargo xtask bench`; {ROUNDS} interleaved rounds, min / median / max.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(md, "## Per-call cost of a hooked function\n");
    let _ = writeln!(
        md,
        "ns per call of `hipStreamSynchronize(NULL)` in a loop (bench_calls). \"empty pair\" is an empty uprobe + uretprobe on the same instruction: the trap alone, the floor for any uprobe tracer; it runs before and again after rocsync in every round. The ratio is (rocsync − untraced) / (empty − untraced): in each round to the mean of the two empty-pair runs around it, median and range of the rounds; the ratio of the modes' medians follows it. \"side by side\": the same ratio with the three modes in one process — rounds of 10 000 calls to each of an untraced copy of the library, a copy under the empty pair and the library under `rocsync run`, alternating (`rocsync-bench side-by-side`): the machine drifts between separate runs by more than the margin measured; batches milliseconds apart see the same machine. Its columns are the lower quartile, median and upper quartile of all its rounds.\n"
    );
    let _ = writeln!(md, "| library | mode | min | median | max |");
    let _ = writeln!(md, "| --- | --- | ---: | ---: | ---: |");
    let mut json_cases = Vec::new();
    for ((c, r), [sbs, classic, multi_floor]) in cases.iter().zip(results).zip(pooled) {
        let med: Vec<f64> = r.iter().map(|x| stats(x).1).collect();
        for ((label, ..), xs) in c.modes.iter().zip(r) {
            let (lo, mid, hi) = stats(xs);
            let _ = writeln!(
                md,
                "| {} | {label} | {lo:.0} | {mid:.0} | {hi:.0} |",
                c.name
            );
        }
        let rounds: Vec<f64> = (0..r[0].len())
            .map(|k| (r[2][k] - r[0][k]) / ((r[1][k] + r[3][k]) / 2.0 - r[0][k]))
            .collect();
        let (rlo, ratio, rhi) = stats(&rounds);
        let of_medians = (med[2] - med[0]) / (med[1] - med[0]);
        let (lo, _, hi) = stats(&r[0]);
        if med[1] - med[0] > hi - lo {
            let _ = writeln!(
                md,
                "| {} | **ratio (c−a)/(b−a)** of the rounds | {rlo:.2} | **{ratio:.2}** | {rhi:.2} |\n| {} | ratio of the medians | | {of_medians:.2} | |",
                c.name, c.name
            );
        } else {
            let _ = writeln!(
                md,
                "| {} | ratio (c−a)/(b−a) | | n/a: the empty pair ({:.0} ns) is within the untraced spread ({lo:.0}–{hi:.0} ns) | |",
                c.name,
                med[1] - med[0]
            );
        }
        let [q1, q2, q3] = quartiles(sbs);
        if c.side_by_side {
            let _ = writeln!(
                md,
                "| {} | **ratio side by side**, {} rounds in one process | {q1:.3} | **{q2:.3}** | {q3:.3} |",
                c.name,
                sbs.len()
            );
            let [_, classic_q2, _] = quartiles(classic);
            let [_, floor_q2, _] = quartiles(multi_floor);
            let _ = writeln!(
                md,
                "| {} | side by side: rocsync `--classic-uprobes` (call probes through perf events) | | {classic_q2:.3} | |\n| {} | side by side: the empty pair through multi-uprobe links | | {floor_q2:.3} | |\n| {} | rocsync over the empty multi-uprobe pair (like for like: quotient of the medians) | | {:.3} | |",
                c.name,
                c.name,
                c.name,
                q2 / floor_q2
            );
        }
        if c.modes.len() == 6 {
            let gain = (med[5] - med[0]) / (med[2] - med[0]);
            let _ = writeln!(
                md,
                "| {} | probe placement: overhead at entry / after endbr64 | | **{gain:.1}×** | |",
                c.name
            );
        }
        json_cases.push(json!({ "name": c.name, "modes": c.modes.iter().map(|m| m.0).collect::<Vec<_>>(), "ns_per_call": r, "ratio": ratio, "round_ratios": rounds, "ratio_of_medians": of_medians, "side_by_side_ratios": sbs, "side_by_side_quartiles": [q1, q2, q3], "side_by_side_classic_ratios": classic, "side_by_side_multi_floor_ratios": multi_floor }));
    }
    let _ = writeln!(
        md,
        "\n## 8 threads, paced and flat out (default 8 MiB ring)\n"
    );
    let _ = writeln!(
        md,
        "| asked calls/s | calls made | captured | dropped | drop rate | achieved calls/s |"
    );
    let _ = writeln!(md, "| ---: | ---: | ---: | ---: | ---: | ---: |");
    for (label, v) in threads {
        let calls = v["calls"].as_u64().unwrap_or(0);
        let dropped = v["dropped"].as_u64().unwrap_or(0);
        let rate = calls as f64 / v["seconds"].as_f64().unwrap_or(1.0);
        let share = 100.0 * dropped as f64 / calls.max(1) as f64;
        let _ = writeln!(
            md,
            "| {label} | {calls} | {} | {dropped} | {share:.2}% | {rate:.0} |",
            v["captured"]
        );
    }
    let _ = writeln!(
        md,
        "\n## Userspace: decode → order → resolve → Kineto JSON, one core\n"
    );
    let _ = writeln!(
        md,
        "| stream | records/s min | median | max (2 M records) | peak RSS, 10 M records | records/s, 10 M |"
    );
    let _ = writeln!(md, "| --- | ---: | ---: | ---: | ---: | ---: |");
    for (churn, rates, big) in pipeline {
        let (lo, mid, hi) = stats(rates);
        let name = if *churn {
            "an event created and destroyed per iteration"
        } else {
            "64 events reused"
        };
        let rss = big["peak_rss_bytes"].as_f64().unwrap_or(0.0) / (1 << 20) as f64;
        let _ = writeln!(
            md,
            "| {name} | {lo:.0} | {mid:.0} | {hi:.0} | {rss:.1} MiB | {:.0} |",
            big["records_per_s"].as_f64().unwrap_or(0.0)
        );
    }
    md.push_str(&extra_md);
    md.push_str(&super::bin::losses_md());
    let json = json!({
        "extra": extra_json,
        "machine": machine, "kernel": kernel, "commit": commit, "date": date, "rounds": ROUNDS,
        "cases": json_cases,
        "threads": threads.iter().map(|(l, v)| json!({"ring": l, "result": v})).collect::<Vec<_>>(),
        "pipeline": pipeline.iter().map(|(c, r, b)| json!({"churn": c, "records_per_s": r, "ten_million": b})).collect::<Vec<_>>(),
    });
    std::fs::create_dir_all(root().join("bench"))?;
    std::fs::write(
        root().join("bench/results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    std::fs::write(root().join("bench/RESULTS.md"), &md)?;
    println!("{md}");
    Ok(())
}
