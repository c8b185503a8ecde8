//! NCCL/RCCL collectives traced from outside: a job of rank processes over the simulated
//! libraries (tests/c/nccl_api.c, nccl_ranks.c), checked against the job's own log —
//! every collective a row with its number, the communicator's id the same on every rank
//! and equal to the hash of the unique id the job printed. Needs root.

use std::{
    io::{BufRead, BufReader},
    process::Stdio,
    sync::mpsc,
};

use serde_json::Value;

use crate::common::*;

/// rocsync's id of a communicator: its unique id (`uid <hex>`, as the job prints it),
/// hashed as `rocsync_common::comm_id` does.
pub(crate) fn comm_id_of(uid_hex: &str) -> String {
    let bytes: Vec<u8> = (0..128)
        .map(|i| u8::from_str_radix(&uid_hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let mut words = [0u64; 16];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        *w = u64::from_le_bytes(chunk.try_into().unwrap());
    }
    format!("{:#x}", rocsync_common::comm_id(&words))
}

/// The job's stdout, line by line, as it comes.
pub(crate) fn job_lines(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

#[test]
fn every_collective_is_a_row_numbered_in_its_communicator_with_the_same_id_on_each_rank() {
    let name =
        "every_collective_is_a_row_numbered_in_its_communicator_with_the_same_id_on_each_rank";
    if !can_trace(name) {
        return;
    }
    let dir = TempDir::new();
    let out = dir.path("t.json");
    // 3 ranks, 5 collectives each, nobody late; the libnccl flavour (CUDA's names).
    let mut run = rocsync()
        .args(["run", "-o"])
        .arg(&out)
        .arg(rocsync_tests::nccl_ranks_cuda())
        .args(["3", "5", "0", "0", "0", "50"])
        .env("TMPDIR", dir.path(""))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut run);
    let status = run.wait().unwrap();
    assert!(status.success());
    let printed: Vec<String> = rx.try_iter().collect();
    let uid = printed[0].strip_prefix("uid ").unwrap();
    let id = comm_id_of(uid);
    let mut ranks_seen = Vec::new();
    for line in printed.iter().filter(|l| l.contains(" comm ")) {
        // "rank R pid P comm 0x…"
        let w: Vec<&str> = line.split(' ').collect();
        let (rank, pid): (u64, u32) = (w[1].parse().unwrap(), w[3].parse().unwrap());
        let trace = read_json(&dir.path(&format!("t_{pid}.json")));
        let rows: Vec<&Value> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "cpu_op")
            .collect();
        let seqs: Vec<u64> = rows
            .iter()
            .filter(|e| e["name"] == "ncclAllReduce")
            .map(|e| e["args"]["Seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5], "rank {rank}");
        for e in rows.iter().filter(|e| e["name"] == "ncclAllReduce") {
            let a = &e["args"];
            assert_eq!(a["Comms Id"], id.as_str(), "{a}");
            assert_eq!(a["Rank"], rank);
            assert_eq!(a["Group size"], 3);
            assert_eq!(a["Collective name"], "allreduce");
            assert_eq!(a["dtype"], "Float");
            assert_eq!(a["In msg nelems"], 1024 + a["Seq"].as_u64().unwrap());
            assert_eq!(a["comm"], w[5]);
        }
        let init = rows
            .iter()
            .find(|e| e["name"] == "ncclCommInitRank")
            .unwrap();
        assert_eq!(init["args"]["comm"], w[5]);
        ranks_seen.push(rank);
    }
    ranks_seen.sort();
    assert_eq!(ranks_seen, [0, 1, 2]);
}

/// The pid each rank printed as it started, in rank order.
fn started(rx: &mpsc::Receiver<String>, n: usize) -> Vec<u32> {
    let mut pids = vec![0; n];
    while pids.contains(&0) {
        let line = rx.recv().unwrap();
        let w: Vec<&str> = line.split(' ').collect();
        if w.len() == 5 && w[4] == "started" {
            pids[w[1].parse::<usize>().unwrap()] = w[3].parse().unwrap();
        }
    }
    pids
}

#[test]
fn a_rank_attached_mid_run_numbers_from_its_attach_and_report_aligns_it_by_its_collectives() {
    let name =
        "a_rank_attached_mid_run_numbers_from_its_attach_and_report_aligns_it_by_its_collectives";
    if !can_trace(name) {
        return;
    }
    let dir = TempDir::new();
    let job_dir = dir.path("job");
    std::fs::create_dir(&job_dir).unwrap();
    // 2 ranks, 100 collectives 40 ms apart, after 4 s: rank 0 is attached before its
    // communicator's set-up (an attach records once its probes are in, which took over
    // 1.5 s on a loaded machine), rank 1 once it has entered collective 10 (with 3.6 s
    // left: 2 s were not always enough for its rocsync to find it alive).
    let mut job = std::process::Command::new(rocsync_tests::nccl_ranks())
        .args(["2", "100", "9", "0", "0", "4000", "40"])
        .env("TMPDIR", dir.path(""))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut job);
    let _uid = rx.recv().unwrap();
    let pids = started(&rx, 2);
    let attach = |pid: u32, secs: &str, out: &str| {
        rocsync()
            .args([
                "attach",
                "--no-status",
                "--duration",
                secs,
                "-p",
                &pid.to_string(),
                "-o",
            ])
            .arg(job_dir.join(out))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Until its process exits (its last collective about 8 s after it starts): a capture
    // that ends first, begun late on a loaded machine, missed the last ones (57 of 60).
    let first = attach(pids[0], "10", "rank0.json");
    let tenth = format!("rank 1 pid {} allreduce 10", pids[1]);
    while rx.recv().unwrap() != tenth {}
    let second = attach(pids[1], "1", "rank1.json")
        .wait_with_output()
        .unwrap();
    let said = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(second.status.success(), "{}", said(&second));
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", said(&first));
    assert!(job.wait().unwrap().success());

    // Rank 1's rows are numbered from its attach: its #1 is a later collective.
    let t = read_json(&job_dir.join("rank1.json"));
    let rows: Vec<&Value> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "ncclAllReduce")
        .collect();
    assert!(rows.len() >= 3, "{} rows", rows.len());
    let first_row = &rows[0]["args"];
    assert_eq!(first_row["Seq"], 1);
    assert!(first_row["Comms Id"].is_null(), "{first_row}");
    // Its true number: the job reduces 1024 + N floats in collective N.
    let true_last = rows.last().unwrap()["args"]["In msg nelems"]
        .as_u64()
        .unwrap()
        - 1024;
    assert!(true_last > 10);

    let out = run_ok(rocsync().args(["report", "--json"]).arg(&job_dir));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let comms = report["communicators"].as_array().unwrap();
    assert_eq!(comms.len(), 1, "{report}");
    let ranks = comms[0]["ranks"].as_array().unwrap();
    let r1 = ranks.iter().find(|r| r["pid"] == pids[1]).unwrap();
    assert_eq!(r1["at"], true_last, "{report}");
    assert_eq!(r1["how"], "last_row");
}
