//! What a traced process says about itself: its name and its rank in a distributed job,
//! from `/proc/PID/environ` (as launchers set it: torchrun, mpirun, srun, …) — read as
//! root from a file the target controls, so bounded and never trusted beyond parsing.

use std::io::Read as _;

use serde_json::{Map, Value};

use crate::{
    calls::emit::processes::ProcessInfo,
    os::{procfs, procfs::exited},
};

/// Longest environment read.
const MAX_ENVIRON: u64 = 1 << 20;

/// Variables naming the rank, the world size and the local rank, first found wins.
const RANK: &[&str] = &["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"];
const WORLD_SIZE: &[&str] = &[
    "WORLD_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "SLURM_NTASKS",
];
const LOCAL_RANK: &[&str] = &[
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
];

/// What a process's environment says: who it is, and which GPUs it sees.
pub(crate) struct Identity {
    pub info: ProcessInfo,
    /// `HIP_VISIBLE_DEVICES` (else `CUDA_VISIBLE_DEVICES`, which HIP honours too): HIP
    /// device N is the GPU agent enumerated `visible[N]`-th. `None`: device N is agent N.
    pub visible: Option<Vec<u32>>,
}

/// Numbers `config`'s GPU agents as the process's HIP devices: with `visible`, HIP device
/// N is the agent enumerated `visible[N]`-th (the kernel reads the table at each queue).
pub(crate) fn number_agents(config: &mut rocsync_common::Config, visible: &[u32]) {
    use rocsync_common::HIDDEN_AGENT;
    config.remap = 1;
    for (device, &agent) in visible.iter().enumerate().take(HIDDEN_AGENT as usize) {
        if let Some(slot) = config.agent_devices.get_mut(agent as usize)
            && *slot == HIDDEN_AGENT
        {
            *slot = device as u8;
        }
    }
}

/// Reads `pid`'s name, distributed identity and visible devices; `None` when it is gone
/// (or has exited and not been reaped: a zombie's environment reads empty, which would
/// say nothing of who it was).
pub(crate) fn read(pid: u32) -> Option<Identity> {
    read_with_maps(pid, &procfs::maps(pid).unwrap_or_default())
}

/// As [`read`], its maps read already (the libraries it maps name its backend).
pub(crate) fn read_with_maps(pid: u32, maps: &str) -> Option<Identity> {
    let environ = raw(pid)?;
    if environ.is_empty() && exited(pid) {
        return None;
    }
    let comm = procfs::read(pid, "comm").ok()?;
    Some(Identity {
        info: ProcessInfo {
            name: comm.trim_end().to_string(),
            distributed: distributed(&environ, maps),
            ..ProcessInfo::default()
        },
        visible: visible_devices(&vars(&environ)),
    })
}

/// `pid`'s environment as it started, bounded.
fn raw(pid: u32) -> Option<Vec<u8>> {
    let mut environ = Vec::new();
    std::fs::File::open(procfs::path(pid, "environ"))
        .ok()?
        .take(MAX_ENVIRON)
        .read_to_end(&mut environ)
        .ok()?;
    Some(environ)
}

fn vars(environ: &[u8]) -> Vec<(&[u8], &[u8])> {
    environ
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let eq = kv.iter().position(|&b| b == b'=')?;
            Some((&kv[..eq], &kv[eq + 1..]))
        })
        .collect()
}

/// The visible-device list as HIP reads it: ordinals up to the first entry that is not
/// one (device UUIDs cannot be mapped to enumeration ordinals here: `None`).
pub(crate) fn visible_devices(vars: &[(&[u8], &[u8])]) -> Option<Vec<u32>> {
    let (_, v) = ["HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"]
        .iter()
        .find_map(|n| vars.iter().find(|(k, _)| *k == n.as_bytes()))?;
    let list: Vec<u32> = std::str::from_utf8(v)
        .ok()?
        .split(',')
        .map_while(|d| d.trim().parse().ok())
        .collect();
    (!list.is_empty()).then_some(list)
}

/// The `distributedInfo` object: `rank`, `world_size`, `local_rank` as the environment
/// gives them (with the variable each came from), `backend` when a collective library
/// is mapped.
pub(crate) fn distributed(environ: &[u8], maps: &str) -> Value {
    let vars = vars(environ);
    let find = |names: &[&'static str]| {
        names.iter().find_map(|n| {
            let (_, v) = vars.iter().find(|(k, _)| *k == n.as_bytes())?;
            let v: u64 = std::str::from_utf8(v).ok()?.trim().parse().ok()?;
            Some((v, *n))
        })
    };
    let mut info = Map::new();
    for (key, names) in [
        ("rank", RANK),
        ("world_size", WORLD_SIZE),
        ("local_rank", LOCAL_RANK),
    ] {
        if let Some((v, var)) = find(names) {
            info.insert(key.into(), v.into());
            info.insert(format!("{key}_from"), var.into());
        }
    }
    // PyTorch names RCCL's backend "nccl" too.
    if maps.contains("/librccl") || maps.contains("/libnccl") {
        info.insert("backend".into(), "nccl".into());
    }
    Value::Object(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_variables_in_order_of_preference() {
        let env =
            b"PATH=/bin\0RANK=3\0WORLD_SIZE=8\0SLURM_PROCID=9\0OMPI_COMM_WORLD_LOCAL_RANK=1\0";
        let v = distributed(env, "7f00 r-xp /opt/rocm/lib/librccl.so.1\n");
        assert_eq!(v["rank"], 3);
        assert_eq!(v["rank_from"], "RANK");
        assert_eq!(v["world_size"], 8);
        assert_eq!(v["local_rank"], 1);
        assert_eq!(v["local_rank_from"], "OMPI_COMM_WORLD_LOCAL_RANK");
        assert_eq!(v["backend"], "nccl");
    }

    #[test]
    fn visible_devices_as_hip_reads_them() {
        let v = |env: &[u8]| visible_devices(&vars(env));
        assert_eq!(v(b"HIP_VISIBLE_DEVICES=1,0\0"), Some(vec![1, 0]));
        assert_eq!(v(b"CUDA_VISIBLE_DEVICES=2,x,3\0"), Some(vec![2]));
        assert_eq!(
            v(b"CUDA_VISIBLE_DEVICES=3\0HIP_VISIBLE_DEVICES=1\0"),
            Some(vec![1])
        );
        assert_eq!(v(b"HIP_VISIBLE_DEVICES=GPU-8a1b\0"), None);
        assert_eq!(
            v(b"ROCR_VISIBLE_DEVICES=1\0"),
            None,
            "ROCr renumbers agents itself"
        );
    }

    #[test]
    fn an_exited_process_says_nothing_rather_than_an_empty_environment() {
        let mut child = std::process::Command::new("true")
            .env("RANK", "4")
            .spawn()
            .unwrap();
        let pid = child.id();
        rocsync_tests::wait_until_zombie(pid);
        assert!(exited(pid));
        assert!(
            read(pid).is_none(),
            "a zombie's empty environment is not its identity"
        );
        child.wait().unwrap();
        assert!(read(pid).is_none());
        let me = read(std::process::id()).expect("a live process is read");
        assert!(!me.info.name.is_empty());
    }

    #[test]
    fn nothing_known_is_nothing_said() {
        let v = distributed(b"RANK=not-a-number\0=\0\0garbage", "");
        assert_eq!(v, Value::Object(Map::new()));
        assert_eq!(distributed(b"SLURM_PROCID=2", "")["rank"], 2);
    }
}
