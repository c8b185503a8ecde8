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
pub fn comm_id_of(uid_hex: &str) -> String {
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
pub fn job_lines(child: &mut std::process::Child) -> mpsc::Receiver<String> {
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
            assert_eq!(a["In msg nelems"], 1024);
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
