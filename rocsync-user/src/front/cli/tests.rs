use super::*;

#[test]
fn parses_run_with_a_command_after_the_separator() {
    let cli =
        Cli::try_parse_from(["rocsync", "run", "--raw", "r.jsonl", "--", "app", "-x"]).unwrap();
    let Command::Run(r) = cli.command else {
        panic!()
    };
    assert_eq!(r.command, vec!["app", "-x"]);
    assert_eq!(r.out.raw, Some(PathBuf::from("r.jsonl")));
    // Without `--`: the flags after the command are the command's.
    let cli = Cli::try_parse_from(["rocsync", "run", "-o", "x.json", "python", "-c", "1", "-o"]);
    let Command::Run(r) = cli.unwrap().command else {
        panic!()
    };
    assert_eq!(r.command, vec!["python", "-c", "1", "-o"]);
    assert_eq!(r.out.output, Some(PathBuf::from("x.json")));
}

#[test]
fn ring_sizes_in_mib_or_kib() {
    assert_eq!(parse_ring_size("8"), Ok(8 << 20));
    assert_eq!(parse_ring_size("4K"), Ok(4096));
    for bad in ["0", "3", "2048", "2K", "12K", "x", "-1"] {
        assert!(parse_ring_size(bad).is_err(), "{bad}");
    }
}

#[test]
fn rejects_bad_durations() {
    for bad in ["0", "-1", "abc", "inf", "10x", ""] {
        assert!(
            Cli::try_parse_from(["rocsync", "attach", "--pid", "1", "--duration", bad]).is_err(),
            "{bad}"
        );
    }
    let cli = Cli::try_parse_from(["rocsync", "attach", "--pid", "1", "-d", "1.5"]).unwrap();
    let Command::Attach(a) = cli.command else {
        panic!()
    };
    assert_eq!(a.duration, Some(Duration::from_millis(1500)));
    for (typed, ms) in [
        ("10", 10_000),
        ("10s", 10_000),
        ("500ms", 500),
        ("2m", 120_000),
    ] {
        let cli = Cli::try_parse_from(["rocsync", "trace", "--all", "--duration", typed]);
        let Command::Trace(t) = cli.unwrap().command else {
            panic!()
        };
        assert_eq!(t.duration, Duration::from_millis(ms), "{typed}");
    }
}
