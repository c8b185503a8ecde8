//! Scenarios written in Rust against any HIP or CUDA runtime, loaded with `libloading`.
//!
//! usage: scenario_driver LIBRARY fan-in PRODUCERS ITERATIONS   (log: $SCENARIO_LOG)
//!
//! fan-in: PRODUCERS threads, each with its own stream and event, record every iteration;
//! one consumer waits on every producer's latest record, queries one event and sometimes
//! synchronizes on one. Every fifth iteration each producer destroys its event and
//! creates another (the allocator hands handles back). Before the loop the consumer waits
//! on an event never recorded.

// Test fixtures may unwrap: a failure here is the test's, with its line (clippy.toml).
#![allow(clippy::unwrap_used)]

use std::{path::Path, process::ExitCode, sync::Barrier};

use rocsync_tests::driver::{Handle, Runtime};

fn fan_in(rt: &Runtime, producers: usize, iterations: usize) {
    rt.set_device(0);
    let consumer = rt.stream_create();
    let never = rt.event_create();
    rt.stream_wait_event(consumer, never);
    let streams: Vec<Handle> = (0..producers).map(|_| rt.stream_create()).collect();
    let events: Vec<std::sync::Mutex<Handle>> = (0..producers)
        .map(|_| std::sync::Mutex::new(rt.event_create()))
        .collect();
    // Recorded, then waited on, then recorded again: each phase behind a barrier.
    let (recorded, waited) = (Barrier::new(producers + 1), Barrier::new(producers + 1));
    std::thread::scope(|s| {
        for p in 0..producers {
            let (stream, event) = (streams[p], &events[p]);
            let (recorded, waited) = (&recorded, &waited);
            s.spawn(move || {
                rt.set_device(0);
                for i in 0..iterations {
                    let mut e = event.lock().unwrap();
                    if i % 5 == 4 {
                        rt.on("EventDestroy", *e);
                        *e = rt.event_create();
                    }
                    rt.launch(stream, 50 + 20 * p as u32);
                    rt.event_record(*e, stream);
                    drop(e);
                    recorded.wait();
                    waited.wait();
                }
            });
        }
        for i in 0..iterations {
            recorded.wait();
            for e in &events {
                rt.stream_wait_event(consumer, *e.lock().unwrap());
            }
            rt.on("EventQuery", *events[0].lock().unwrap());
            if i % 4 == 0 {
                rt.on("EventSynchronize", *events[producers - 1].lock().unwrap());
            }
            waited.wait();
        }
    });
    rt.on("StreamSynchronize", consumer);
    rt.device_synchronize();
    for e in &events {
        rt.on("EventDestroy", *e.lock().unwrap());
    }
    rt.on("EventDestroy", never);
    for s in streams.into_iter().chain([consumer]) {
        rt.on("StreamDestroy", s);
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: scenario_driver LIBRARY fan-in PRODUCERS ITERATIONS";
    let (Some(lib), Some("fan-in"), Some(p), Some(n)) = (
        args.get(1),
        args.get(2).map(String::as_str),
        args.get(3).and_then(|v| v.parse::<usize>().ok()),
        args.get(4).and_then(|v| v.parse::<usize>().ok()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    if p == 0 {
        eprintln!("{usage}: at least one producer");
        return ExitCode::from(2);
    }
    let rt = match Runtime::load(Path::new(lib)) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("scenario_driver: {e}");
            return ExitCode::FAILURE;
        }
    };
    fan_in(&rt, p, n);
    if let Some(log) = std::env::var_os("SCENARIO_LOG")
        && let Err(e) = rt.write_log(Path::new(&log))
    {
        eprintln!("scenario_driver: {}: {e}", Path::new(&log).display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
