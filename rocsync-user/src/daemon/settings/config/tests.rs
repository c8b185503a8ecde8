//! The configuration file's keys and their defaults.

use super::*;

#[test]
fn every_key_and_a_clear_error_for_a_wrong_one() {
    let f = parse(
        "metrics_addr = \"0.0.0.0:9000\"\nstate_dir = \"/srv/r\"\ninclude_exe = [\"python3\"]\nuser = [\"1000\"]\n",
    )
    .unwrap();
    assert_eq!(f.metrics_addr.as_deref(), Some("0.0.0.0:9000"));
    assert_eq!(f.state_dir, Some("/srv/r".into()));
    assert_eq!(f.include_exe, vec!["python3"]);
    assert_eq!(
        parse("max_files_per_user = 3\n")
            .unwrap()
            .max_files_per_user,
        Some(3)
    );
    let f = parse("metric_labels = [\"namespace\", \"pod\"]\n").unwrap();
    assert_eq!(f.metric_labels, ["namespace", "pod"]);
    // Durations are strings or seconds; the others only what they are.
    assert_eq!(
        parse("stall_interval = 90\n")
            .unwrap()
            .stall_interval
            .as_deref(),
        Some("90")
    );
    let e = parse("metric_addr = \"x\"").unwrap_err().to_string();
    assert!(e.contains("unknown field `metric_addr`"), "{e}");
    for (bad, says) in [
        ("socket = 5", "expected a string for key `socket`"),
        (
            "include_exe = \"python3\"",
            "expected a list of strings for key `include_exe`",
        ),
        ("max_files_per_user = -1", "expected a whole number"),
        ("hang_bound = true", "expected a duration"),
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// A flag wins over its key alone; lists too (given whole, never merged).
#[test]
fn flags_win_over_the_files_keys_one_by_one() {
    let file = parse("socket = \"/f.sock\"\ngroup = \"wheel\"\ninclude_exe = [\"a\"]\n").unwrap();
    let flags = ConfigFlags {
        socket: Some("/flag.sock".into()),
        include_exe: vec!["b".into()],
        ..ConfigFlags::default()
    };
    let given = flags.over(file);
    assert_eq!(given.socket, Some("/flag.sock".into()));
    assert_eq!(given.group.as_deref(), Some("wheel"));
    assert_eq!(given.include_exe, ["b"]);
}

/// What a reload keeps from the start is what the settings say waits for a restart.
#[test]
fn a_reload_keeps_exactly_the_settings_that_wait_for_a_restart() {
    let old = DaemonConfig::load(&ConfigFlags::default()).unwrap();
    let new = DaemonConfig::load(&ConfigFlags {
        socket: Some("/other.sock".into()),
        group: Some("0".into()),
        state_dir: Some("/other".into()),
        metrics_addr: Some("127.0.0.1:1".into()),
        dynolog_addr: Some("127.0.0.1:2".into()),
        flight_recorder: Some("3s".into()),
        learn_devices: Some("off".into()),
        budget: Some("5%".into()),
        kubelet_root: Some("/k".into()),
        runtime_state: Some("/r".into()),
        metric_labels: vec!["pod".into()],
        include_exe: vec!["x".into()],
        ..ConfigFlags::default()
    })
    .unwrap();
    let kept = new.clone().keeping_start(&old);
    for s in crate::daemon::settings::keys::SETTINGS {
        let (was, asked, is) = ((s.shown)(&old), (s.shown)(&new), (s.shown)(&kept));
        match s.restart {
            true => assert_eq!(is, was, "{} waits for a restart", s.key),
            false => assert_eq!(is, asked, "{} is reloaded", s.key),
        }
    }
}

#[test]
fn the_learning_window_is_100ms_unless_set_and_off_turns_it_off() {
    let load = |flag: Option<&str>| {
        let flags = ConfigFlags {
            learn_devices: flag.map(str::to_string),
            ..ConfigFlags::default()
        };
        DaemonConfig::load(&flags).map(|c| c.learn_devices)
    };
    assert_eq!(load(None).unwrap(), Duration::from_millis(100));
    assert_eq!(load(Some("2s")).unwrap(), Duration::from_secs(2));
    assert_eq!(load(Some("off")).unwrap(), Duration::ZERO);
    let e = load(Some("soon")).unwrap_err().to_string();
    assert!(e.starts_with("learn_devices: "), "{e}");
}

#[test]
fn the_upload_keys_are_read_from_the_file_and_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rocsync.toml");
    std::fs::write(
        &path,
        "upload = \"s3://traces/fleet\"\nupload_endpoint = \"http://minio.internal:9000\"\n\
         upload_region = \"eu-west-1\"\nnode_name = \"gpu-7\"\n",
    )
    .unwrap();
    let flags = ConfigFlags {
        config: Some(path.clone()),
        ..ConfigFlags::default()
    };
    let c = DaemonConfig::load(&flags).unwrap();
    let expected = StoreSettings {
        destination: "s3://traces/fleet".parse().unwrap(),
        endpoint: Some("http://minio.internal:9000".into()),
        region: Some("eu-west-1".into()),
    };
    assert_eq!(c.upload, Some(expected));
    assert_eq!(c.node_name.as_deref(), Some("gpu-7"));
    // Each flag wins over its key alone; the others still come from the file.
    let flags = ConfigFlags {
        config: Some(path.clone()),
        upload: Some("s3://other".into()),
        upload_region: Some("us-west-2".into()),
        ..ConfigFlags::default()
    };
    let u = DaemonConfig::load(&flags).unwrap().upload.unwrap();
    assert_eq!(u.destination.to_string(), "s3://other");
    assert_eq!(u.endpoint.as_deref(), Some("http://minio.internal:9000"));
    assert_eq!(u.region.as_deref(), Some("us-west-2"));
    // No `upload`: the endpoint alone uploads nothing.
    std::fs::write(&path, "upload_endpoint = \"http://minio.internal:9000\"\n").unwrap();
    let flags = ConfigFlags {
        config: Some(path.clone()),
        ..ConfigFlags::default()
    };
    assert_eq!(DaemonConfig::load(&flags).unwrap().upload, None);
    // A bad destination names its key.
    std::fs::write(&path, "upload = \"traces\"\n").unwrap();
    let e = format!("{:#}", DaemonConfig::load(&flags).unwrap_err());
    assert!(e.starts_with("upload: "), "{e}");
    // Credentials are never read from the file (documented): an unknown key.
    std::fs::write(&path, "aws_secret_access_key = \"x\"\n").unwrap();
    let e = format!("{:#}", DaemonConfig::load(&flags).unwrap_err());
    assert!(e.contains("unknown field"), "{e}");
}

/// The example configurations with every commented-out `# key = value` line taken in.
const EXAMPLES: [(&str, &str); 2] = [
    (
        "dist/rocsync.toml",
        include_str!("../../../../../dist/rocsync.toml"),
    ),
    (
        "deploy/kubernetes/rocsync.toml",
        include_str!("../../../../../deploy/kubernetes/rocsync.toml"),
    ),
];

fn uncommented(text: &str) -> String {
    let example = |l: &str| {
        let key: String = l
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        !key.is_empty() && l[key.len()..].starts_with(" = ")
    };
    text.lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if example(rest) => rest,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every setting a flag gives has its key in each example (commented out or set),
/// and the examples, uncommented, are a configuration the daemon takes: a misspelt key, a
/// bad duration or destination in a comment would mislead whoever uncomments it.
#[test]
fn every_setting_has_an_example_and_the_examples_load() {
    let cli = <crate::front::cli::Cli as clap::CommandFactory>::command();
    let daemon = cli.find_subcommand("daemon").unwrap();
    let settings: Vec<String> = daemon
        .get_arguments()
        .filter_map(|a| a.get_long())
        // The file itself, --check, and the hidden lock are no keys; the socket and
        // group have their defaults in the unit.
        .filter(|l| !["config", "check", "lock", "socket", "group"].contains(l))
        .map(|l| l.replace('-', "_"))
        .collect();
    assert!(settings.len() > 20, "{settings:?}");
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in EXAMPLES {
        let text = uncommented(text);
        let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        let missing: Vec<&String> = settings
            .iter()
            .filter(|s| !table.contains_key(*s))
            .collect();
        assert!(missing.is_empty(), "{name} has no example of {missing:?}");
        let path = dir.path().join("example.toml");
        std::fs::write(&path, &text).unwrap();
        let flags = ConfigFlags {
            config: Some(path),
            ..ConfigFlags::default()
        };
        let c = DaemonConfig::load(&flags).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        // What the stall and upload examples say, as loaded.
        assert_eq!(
            c.capture_on_stall,
            Some(Duration::from_millis(50)),
            "{name}"
        );
        assert_eq!(c.hang_bound, Duration::from_secs(120), "{name}");
        let upload = c.upload.unwrap_or_else(|| panic!("{name}: no upload"));
        assert_eq!(upload.destination.to_string(), "s3://my-bucket/rocsync");
        assert!(
            upload.endpoint.is_some() && upload.region.is_some(),
            "{name}"
        );
        assert_eq!(
            c.metric_labels,
            MetricLabels::parse(&["namespace".into(), "pod".into()]).unwrap()
        );
    }
}

/// With nothing set, hangs are traced (5 s) and stalls are not; `off` turns either off
/// (a flag over the file's value too), and a higher stall threshold raises the hangs'.
#[test]
fn hangs_are_traced_by_default_and_off_turns_them_off() {
    let load = |stall: Option<&str>, hang: Option<&str>| {
        let flags = ConfigFlags {
            capture_on_stall: stall.map(str::to_string),
            hang_after: hang.map(str::to_string),
            ..ConfigFlags::default()
        };
        DaemonConfig::load(&flags).map(|c| (c.capture_on_stall, c.hang_after))
    };
    let s = Duration::from_secs;
    assert_eq!(load(None, None).unwrap(), (None, Some(s(5))));
    assert_eq!(load(None, Some("off")).unwrap(), (None, None));
    assert_eq!(load(Some("off"), None).unwrap(), (None, Some(s(5))));
    assert_eq!(
        load(Some("50ms"), Some("1s")).unwrap(),
        (Some(Duration::from_millis(50)), Some(s(1)))
    );
    assert_eq!(load(Some("8s"), None).unwrap(), (Some(s(8)), Some(s(8))));
    let e = load(None, Some("soon")).unwrap_err().to_string();
    assert!(
        e.starts_with("hang_after: ") && e.ends_with("; or off"),
        "{e}"
    );
    let file = parse("capture_on_stall = \"50ms\"\nhang_after = \"2s\"\n").unwrap();
    let flags = ConfigFlags {
        capture_on_stall: Some("off".into()),
        hang_after: Some("off".into()),
        ..ConfigFlags::default()
    };
    let given = flags.over(file);
    let c = DaemonConfig::load(&given).unwrap();
    assert_eq!((c.capture_on_stall, c.hang_after), (None, None));
    // The kernel announces returns past the lower threshold (a hang's ends its trace).
    assert_eq!(c.kernel_threshold(), None);
    let c = DaemonConfig::load(&ConfigFlags::default()).unwrap();
    assert_eq!(c.kernel_threshold(), Some(s(5)));
    let c = DaemonConfig::load(&ConfigFlags {
        capture_on_stall: Some("50ms".into()),
        ..ConfigFlags::default()
    });
    assert_eq!(
        c.unwrap().kernel_threshold(),
        Some(Duration::from_millis(50))
    );
}
