//! The configuration file's keys and their defaults.

use super::*;

#[test]
fn every_key_and_a_clear_error_for_a_wrong_one() {
    let f: File = toml::from_str(
        "metrics_addr = \"0.0.0.0:9000\"\nstate_dir = \"/srv/r\"\ninclude_exe = [\"python3\"]\nuser = [\"1000\"]\n",
    )
    .unwrap();
    assert_eq!(f.metrics_addr.as_deref(), Some("0.0.0.0:9000"));
    assert_eq!(f.include_exe, vec!["python3"]);
    let f: File = toml::from_str("max_files_per_user = 3\n").unwrap();
    assert_eq!(f.max_files_per_user, Some(3));
    let f: File = toml::from_str("metric_labels = [\"namespace\", \"pod\"]\n").unwrap();
    assert_eq!(f.metric_labels, ["namespace", "pod"]);
    let e = toml::from_str::<File>("metric_addr = \"x\"").unwrap_err();
    assert!(e.to_string().contains("unknown field"), "{e}");
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
