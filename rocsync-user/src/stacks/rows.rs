//! The blocked thread's stack as trace rows: complete (`"X"`) slices on its own track
//! (pid and host tid, as the runtime rows), outermost first, each a nanosecond inside the
//! one before it so Perfetto nests them as a flame: the Python frames, then the native
//! frames the innermost Python frame called (the interpreter's own frames, which the
//! Python frames stand for, are left to the `stacks` object and counted on the row).

use serde_json::{Value, json};

use super::model::{NativeFrame, PyFrame, Stacks};

/// Categories of the rows, as Perfetto's filter and HTA see them.
pub const PYTHON_CATEGORY: &str = "python_stack";
pub const NATIVE_CATEGORY: &str = "native_stack";

/// One nesting level, in µs: 1 ns, what the trace's three decimals still tell apart.
const STEP_US: f64 = 0.001;

impl Stacks {
    /// The blocked thread's frames as rows from `ts_us` for `dur_us` (trace µs).
    pub fn rows(&self, ts_us: f64, dur_us: f64) -> Vec<Value> {
        let Some(thread) = self.blocked() else {
            return Vec::new();
        };
        let python = thread.python_stack.as_deref().unwrap_or_default();
        let native = thread.native_stack.as_deref().unwrap_or_default();
        // Innermost first: the frames under the innermost interpreter frame only, when
        // Python frames stand for the rest.
        let (native_shown, hidden) = match native.iter().position(interpreter) {
            Some(i) if !python.is_empty() => (&native[..i], native.len() - i),
            _ => (native, 0),
        };
        let mut rows: Vec<(&str, String, Value)> = python.iter().rev().map(python_row).collect();
        for (i, frame) in native_shown.iter().enumerate().rev() {
            let (name, mut args) = native_row(frame);
            if i + 1 == native_shown.len() && hidden > 0 {
                args["interpreter_frames_not_shown"] = hidden.into();
            }
            rows.push((NATIVE_CATEGORY, name, args));
        }
        rows.into_iter()
            .enumerate()
            .map(|(depth, (cat, name, args))| {
                let inset = depth as f64 * STEP_US;
                json!({
                    "ph": "X", "cat": cat, "name": name,
                    "pid": self.pid, "tid": thread.tid,
                    "ts": ts_us + inset, "dur": (dur_us - 2.0 * inset).max(0.0),
                    "args": args,
                })
            })
            .collect()
    }
}

fn python_row(frame: &PyFrame) -> (&'static str, String, Value) {
    let args = json!({"file": frame.file, "line": frame.line});
    (PYTHON_CATEGORY, frame.function.clone(), args)
}

fn native_row(frame: &NativeFrame) -> (String, Value) {
    let name = frame
        .symbol
        .clone()
        .unwrap_or_else(|| frame.address.clone());
    let args = json!({
        "address": frame.address, "object": frame.object, "offset": frame.offset,
        "symbolized": frame.symbolized,
    });
    (name, args)
}

/// CPython's frame evaluation loop (`_PyEval_EvalFrameDefault`, `PyEval_EvalFrameEx`).
fn interpreter(frame: &NativeFrame) -> bool {
    frame
        .symbol
        .as_deref()
        .is_some_and(|s| s.trim_start_matches('_').starts_with("PyEval_EvalFrame"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::model::Thread;

    fn native(symbol: &str) -> NativeFrame {
        NativeFrame {
            address: "0x10".into(),
            symbol: Some(symbol.into()),
            object: None,
            offset: None,
            symbolized: true,
            scanned: false,
            named_by_call: false,
        }
    }

    fn py(function: &str) -> PyFrame {
        PyFrame {
            function: function.into(),
            file: "/job/t.py".into(),
            line: 3,
        }
    }

    fn stacks(python: Option<Vec<PyFrame>>, natives: &[&str]) -> Stacks {
        Stacks {
            pid: 7,
            threads: vec![
                Thread {
                    tid: 8,
                    blocked: true,
                    python_stack: python,
                    native_stack: Some(natives.iter().map(|s| native(s)).collect()),
                    ..Thread::default()
                },
                Thread {
                    tid: 9,
                    python_stack: Some(vec![py("other")]),
                    ..Thread::default()
                },
            ],
            ..Stacks::default()
        }
    }

    fn names(rows: &[Value]) -> Vec<&str> {
        rows.iter().map(|r| r["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn python_then_what_it_called_nested_outermost_first_on_the_blocked_thread() {
        let s = stacks(
            Some(vec![py("step"), py("<module>")]),
            &[
                "clock_nanosleep",
                "time_sleep",
                "_PyEval_EvalFrameDefault",
                "main",
            ],
        );
        let rows = s.rows(100.0, 50.0);
        assert_eq!(
            names(&rows),
            ["<module>", "step", "time_sleep", "clock_nanosleep"]
        );
        assert_eq!(rows[0]["cat"], PYTHON_CATEGORY);
        assert_eq!(rows[3]["cat"], NATIVE_CATEGORY);
        assert_eq!(rows[2]["args"]["interpreter_frames_not_shown"], 2);
        for (outer, inner) in rows.iter().zip(&rows[1..]) {
            let (o0, i0) = (outer["ts"].as_f64().unwrap(), inner["ts"].as_f64().unwrap());
            let o1 = o0 + outer["dur"].as_f64().unwrap();
            let i1 = i0 + inner["dur"].as_f64().unwrap();
            assert!(o0 < i0 && i1 < o1, "{outer} holds {inner}");
        }
        assert!(
            rows.iter()
                .all(|r| r["pid"] == 7 && r["tid"] == 8 && r["ph"] == "X")
        );
    }

    #[test]
    fn a_native_program_shows_its_whole_stack() {
        let s = stacks(None, &["nanosleep", "main", "__libc_start_main"]);
        let rows = s.rows(0.0, 1.0);
        assert_eq!(names(&rows), ["__libc_start_main", "main", "nanosleep"]);
        assert!(
            rows[0]["args"]
                .get("interpreter_frames_not_shown")
                .is_none()
        );
    }

    #[test]
    fn nothing_read_is_no_rows() {
        assert!(Stacks::default().rows(0.0, 1.0).is_empty());
    }
}
