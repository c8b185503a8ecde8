//! Outputs as root through folders a neighbour controls: `-o` and `report --plot` never
//! pass through a link root does not own (any component, not only the last), and under
//! sudo they go only where the invoking user may write, as theirs. Uses `convert` and
//! `report` on a raw capture (no kernel needed); links of other owners need root.

use std::{
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::Path,
    process::Output,
};

use crate::{common::*, outputs::RAW};

/// The neighbour: nobody's uid, and a group of its own.
const USER: (u32, u32) = (65534, 65533);
const AS_USER: [(&str, &str); 2] = [("SUDO_UID", "65534"), ("SUDO_GID", "65533")];

/// A test's folders: `shared` (anyone writes, as /tmp), `secret` (root's alone) holding
/// `victim` (root's, 0600), and the raw capture. `None` (skipped) without root.
struct Setting {
    dir: TempDir,
}

impl Setting {
    fn new(test: &str) -> Option<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            rocsync_tests::skip(test, "links of other owners and sudo users need root");
            return None;
        }
        let dir = TempDir::new();
        // The temporary folder is root's 0700: the neighbour must reach `shared`.
        chmod(dir.0.path(), 0o755);
        std::fs::create_dir(dir.path("shared")).unwrap();
        chmod(&dir.path("shared"), 0o1777);
        std::fs::create_dir(dir.path("secret")).unwrap();
        chmod(&dir.path("secret"), 0o700);
        std::fs::write(dir.path("secret/victim"), "root's own").unwrap();
        chmod(&dir.path("secret/victim"), 0o600);
        std::fs::write(dir.path("c.jsonl"), RAW).unwrap();
        Some(Self { dir })
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path(name)
    }

    /// A link at `shared/<name>` to `target`, owned by `uid` (as if its owner made it).
    fn link(&self, name: &str, target: &Path, uid: u32) -> std::path::PathBuf {
        let link = self.path(&format!("shared/{name}"));
        std::os::unix::fs::symlink(target, &link).unwrap();
        rustix::fs::chownat(
            rustix::fs::CWD,
            &link,
            Some(rustix::fs::Uid::from_raw(uid)),
            None,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
        link
    }

    /// `secret` holds only `victim`, as it was.
    fn assert_secret_untouched(&self) {
        let names: Vec<_> = std::fs::read_dir(self.path("secret"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["victim"], "the root-only folder was written into");
        assert_eq!(
            std::fs::read_to_string(self.path("secret/victim")).unwrap(),
            "root's own"
        );
        let m = std::fs::metadata(self.path("secret/victim")).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o600));
    }

    fn convert(&self, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
        rocsync()
            .arg("convert")
            .arg(self.path("c.jsonl"))
            .arg("-o")
            .arg(out)
            .args(extra)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    fn plot(&self, dir: &Path, env: &[(&str, &str)]) -> Output {
        rocsync()
            .arg("report")
            .arg(self.path("c.jsonl"))
            .arg("--plot")
            .arg(dir)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn refused(out: &Output, says: &str) {
    let stderr = stderr_of(out);
    assert!(!out.status.success(), "not refused: {stderr}");
    assert!(stderr.contains(says), "{stderr}");
}

#[test]
fn a_parent_folder_linked_by_a_neighbour_is_never_followed() {
    let Some(s) = Setting::new("a_parent_folder_linked_by_a_neighbour_is_never_followed") else {
        return;
    };
    s.link("dirlink", &s.path("secret"), USER.0);
    let out = s.path("shared/dirlink/t.json");
    refused(&s.convert(&out, &[], &[]), "owned by uid 65534");
    s.assert_secret_untouched();
    // Replacing a file there is refused too, forced or not, as root or under sudo.
    let victim = s.path("shared/dirlink/victim");
    refused(&s.convert(&victim, &["-f"], &[]), "owned by uid 65534");
    refused(&s.convert(&victim, &["-f"], &AS_USER), "owned by uid 65534");
    // A link deeper in the path, and one pointing at a link, are no different.
    s.link("hop", &s.path("shared/dirlink"), 0);
    refused(
        &s.convert(&s.path("shared/hop/t.json"), &[], &[]),
        "owned by uid 65534",
    );
    s.assert_secret_untouched();
}

#[test]
fn a_link_root_owns_is_followed() {
    let Some(s) = Setting::new("a_link_root_owns_is_followed") else {
        return;
    };
    std::fs::create_dir(s.path("real")).unwrap();
    s.link("rootlink", &s.path("real"), 0);
    let out = s.convert(&s.path("shared/rootlink/t.json"), &[], &[]);
    assert_ok(&out);
    let trace = read_json(&s.path("real/t.json"));
    assert_eq!(trace["rocsync"]["calls"], 1);
}

#[test]
fn under_sudo_outputs_go_only_where_the_user_may_write() {
    let Some(s) = Setting::new("under_sudo_outputs_go_only_where_the_user_may_write") else {
        return;
    };
    // Root's folder, which the user may read but not write: refused, nothing made.
    std::fs::create_dir(s.path("roots")).unwrap();
    let out = s.convert(&s.path("roots/t.json"), &[], &AS_USER);
    refused(&out, "not writable");
    assert_eq!(std::fs::read_dir(s.path("roots")).unwrap().count(), 0);
    // Where they may write, the trace is theirs.
    let mine = s.path("shared/t.json");
    let out = s.convert(&mine, &[], &AS_USER);
    assert_ok(&out);
    let m = std::fs::metadata(&mine).unwrap();
    assert_eq!((m.uid(), m.gid()), USER);
    // Someone else's file in the sticky folder is not theirs to replace.
    std::fs::write(s.path("shared/roots.json"), "root's").unwrap();
    refused(
        &s.convert(&s.path("shared/roots.json"), &["-f"], &AS_USER),
        "may not replace it",
    );
    assert_eq!(
        std::fs::read_to_string(s.path("shared/roots.json")).unwrap(),
        "root's"
    );
}

#[test]
fn report_plot_never_writes_through_links_and_its_figures_are_the_users() {
    let Some(s) =
        Setting::new("report_plot_never_writes_through_links_and_its_figures_are_the_users")
    else {
        return;
    };
    // A figure's name linked to root's file: refused, the file as it was.
    let figures = s.path("shared/figures");
    std::fs::create_dir(&figures).unwrap();
    chmod(&figures, 0o777);
    std::os::unix::fs::symlink(s.path("secret/victim"), figures.join("wait-histograms.svg"))
        .unwrap();
    refused(&s.plot(&figures, &AS_USER), "symbolic link");
    s.assert_secret_untouched();
    // The folder itself a neighbour's link: nothing made inside root's folder.
    s.link("plotlink", &s.path("secret"), USER.0);
    refused(
        &s.plot(&s.path("shared/plotlink/sub"), &AS_USER),
        "owned by uid 65534",
    );
    s.assert_secret_untouched();
    // Made under sudo: the folders on the way and every figure are the user's.
    let fresh = s.path("shared/new/sub");
    let out = s.plot(&fresh, &AS_USER);
    assert_ok(&out);
    for made in [s.path("shared/new"), fresh.clone()] {
        let m = std::fs::metadata(&made).unwrap();
        assert_eq!((m.uid(), m.gid()), USER, "{}", made.display());
    }
    let names = [
        "blocked-per-thread.svg",
        "wait-histograms.svg",
        "stream-dependencies.svg",
    ];
    for name in names {
        let m = std::fs::symlink_metadata(fresh.join(name)).unwrap();
        assert!(m.file_type().is_file(), "{name}");
        assert_eq!((m.uid(), m.gid()), USER, "{name}");
        let text = std::fs::read_to_string(fresh.join(name)).unwrap();
        assert!(
            text.starts_with("<svg"),
            "{name}: {}",
            &text[..40.min(text.len())]
        );
    }
}
