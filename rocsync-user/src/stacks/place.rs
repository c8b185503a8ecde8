//! `where`: the innermost frame of the program's own code on the blocked thread, as a log
//! line and `rocsync status` name it (`step (train.py:142)`, `main (scenario_hang)`).

use std::path::Path;

use super::model::{NativeFrame, PyFrame, Stacks};

impl Stacks {
    /// The innermost Python frame outside the standard library and installed packages;
    /// for a program that is not Python, the innermost native frame in its executable;
    /// `None` if neither is known.
    pub fn where_(&self) -> Option<String> {
        let thread = self.blocked()?;
        if let Some(frame) = thread.python_stack.iter().flatten().find(|f| own(f)) {
            return Some(format!(
                "{} ({}:{})",
                frame.function,
                file_name(&frame.file),
                frame.line
            ));
        }
        if self.is_python() {
            // The interpreter's own frames say nothing of where the program is.
            return None;
        }
        let exe = self.executable.as_deref()?;
        let frame = thread
            .native_stack
            .iter()
            .flatten()
            .find(|f| f.object.as_deref() == Some(exe))?;
        Some(format!("{} ({})", native_name(frame)?, file_name(exe)))
    }

    /// Whether the process runs Python, as far as the read could tell.
    pub fn is_python(&self) -> bool {
        self.python_version.is_some()
            || self.threads.iter().any(|t| t.python_stack.is_some())
            || self.executable.as_deref().is_some_and(python_like)
    }
}

/// Whether a mapped file's path names a Python interpreter or its library (`python3.11`,
/// `libpython3.12.so.1.0`): the processes whose Python stacks are read.
pub fn python_like(path: &str) -> bool {
    let name = file_name(path);
    let rest = name
        .strip_prefix("libpython")
        .or_else(|| name.strip_prefix("python"));
    rest.is_some_and(|r| r.is_empty() || r.starts_with(|c: char| c.is_ascii_digit()))
}

/// A frame of the program's own code: not `<frozen …>`/`<string>`, not in site- or
/// dist-packages, not in the standard library (`…/lib/python3.11/…`).
fn own(frame: &PyFrame) -> bool {
    let file = &frame.file;
    if file.starts_with('<') || file.contains("/site-packages/") || file.contains("/dist-packages/")
    {
        return false;
    }
    let parts: Vec<&str> = file.split('/').collect();
    !parts.windows(2).any(|w| {
        matches!(w[0], "lib" | "lib64" | "Lib")
            && w[1]
                .strip_prefix("python")
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    })
}

fn native_name(frame: &NativeFrame) -> Option<String> {
    frame.symbol.clone().or_else(|| frame.offset.clone())
}

fn file_name(path: &str) -> &str {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::model::Thread;

    fn py(function: &str, file: &str, line: i64) -> PyFrame {
        PyFrame {
            function: function.into(),
            file: file.into(),
            line,
        }
    }

    fn native(symbol: Option<&str>, object: &str) -> NativeFrame {
        NativeFrame {
            address: "0x1".into(),
            symbol: symbol.map(String::from),
            object: Some(object.into()),
            offset: Some("0x10".into()),
            symbolized: symbol.is_some(),
            scanned: false,
            named_by_call: false,
        }
    }

    fn blocked(thread: Thread) -> Stacks {
        Stacks {
            threads: vec![
                Thread {
                    tid: 2,
                    python_stack: Some(vec![py("elsewhere", "/job/other.py", 1)]),
                    ..Thread::default()
                },
                Thread {
                    blocked: true,
                    ..thread
                },
            ],
            ..Stacks::default()
        }
    }

    #[test]
    fn the_innermost_python_frame_of_the_programs_own_code() {
        let stacks = blocked(Thread {
            python_stack: Some(vec![
                py("wait", "/usr/lib/python3.11/threading.py", 320),
                py(
                    "synchronize",
                    "/venv/lib/python3.12/site-packages/torch/cuda/streams.py",
                    108,
                ),
                py("_call", "/usr/lib/python3/dist-packages/x.py", 3),
                py("_find", "<frozen importlib._bootstrap>", 1),
                py("step", "/job/train.py", 142),
                py("<module>", "/job/train.py", 200),
            ]),
            ..Thread::default()
        });
        assert_eq!(stacks.where_().as_deref(), Some("step (train.py:142)"));
    }

    #[test]
    fn a_project_under_a_lib_folder_is_the_programs_own() {
        let stacks = blocked(Thread {
            python_stack: Some(vec![py("run", "/home/u/lib/pythonic/run.py", 7)]),
            ..Thread::default()
        });
        assert_eq!(stacks.where_().as_deref(), Some("run (run.py:7)"));
    }

    #[test]
    fn a_native_program_is_where_its_executable_is() {
        let mut stacks = blocked(Thread {
            native_stack: Some(vec![
                native(
                    Some("clock_nanosleep"),
                    "/usr/lib/x86_64-linux-gnu/libc.so.6",
                ),
                native(None, "/opt/app/scenario_hang"),
                native(Some("main"), "/opt/app/scenario_hang"),
            ]),
            ..Thread::default()
        });
        stacks.threads[0].python_stack = None;
        stacks.executable = Some("/opt/app/scenario_hang".into());
        assert_eq!(stacks.where_().as_deref(), Some("0x10 (scenario_hang)"));
    }

    #[test]
    fn a_python_process_with_only_library_frames_is_nowhere() {
        let stacks = blocked(Thread {
            python_stack: Some(vec![py("get", "/usr/lib/python3.11/queue.py", 1)]),
            native_stack: Some(vec![native(Some("main"), "/usr/bin/python3.11")]),
            ..Thread::default()
        });
        assert_eq!(stacks.where_(), None);
        assert_eq!(Stacks::default().where_(), None);
    }

    #[test]
    fn python_like_names() {
        for yes in [
            "/usr/bin/python3.11",
            "/x/libpython3.12.so.1.0",
            "python",
            "python3",
        ] {
            assert!(python_like(yes), "{yes}");
        }
        for no in [
            "/usr/bin/pythonista",
            "/x/libpythonic.so",
            "/bin/sleep",
            "ipython",
        ] {
            assert!(!python_like(no), "{no}");
        }
    }
}
