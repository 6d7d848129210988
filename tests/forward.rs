//! The old subcommands, kept for one release (CHANGELOG.md): `selfdestruct node-gate
//! ...` and `selfdestruct schedule ...` run `selfdestruct-node-gate ...` and
//! `selfdestruct-schedule ...` from beside the agent's binary, in its place (the same
//! pid: PID 1 stays PID 1), with the arguments passed on and a deprecation line; without
//! that binary they exit 2 naming it.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// A folder holding a copy of the agent's binary alone (a hard link where it can be).
fn folder_with_the_agent(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("forward-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the folder");
    let agent = dir.join("selfdestruct");
    if std::fs::hard_link(bin(), &agent).is_err() {
        std::fs::copy(bin(), &agent).expect("copy the binary");
    }
    dir
}

/// `dir`'s `name`: a link to the system's `program`, a stand-in for one of the image's
/// binaries (no executable is written: none can be busy when it runs).
fn stand_in(dir: &Path, name: &str, program: &str) {
    std::os::unix::fs::symlink(program, dir.join(name)).expect("link the stand-in");
}

#[test]
fn the_old_subcommands_run_the_binary_beside_with_the_arguments() {
    let dir = folder_with_the_agent("present");
    // `echo` says how it was run.
    stand_in(&dir, "selfdestruct-schedule", "/bin/echo");
    let agent = dir.join("selfdestruct");
    let home = tempdir("forward-present");
    let args = [
        "--log-level=debug",
        "schedule",
        "preview",
        "2",
        "--from=2026-03-02",
    ];
    let out = command(agent.to_str().unwrap(), &args, &[], &home)
        .output()
        .expect("run the agent's binary");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "--log-level=debug preview 2 --from=2026-03-02\n");
    assert!(
        stderr.contains("`selfdestruct schedule` is deprecated")
            && stderr.contains("run `selfdestruct-schedule`"),
        "{stderr}"
    );
}

/// `exec`: the process started is the one that runs the sibling (as PID 1 it stays PID 1).
#[test]
fn an_old_subcommand_runs_in_the_same_process() {
    let dir = folder_with_the_agent("pid");
    stand_in(&dir, "selfdestruct-node-gate", "/bin/sh");
    let home = tempdir("forward-pid");
    let agent = dir.join("selfdestruct");
    let args = ["node-gate", "-c", "echo pid: $$"];
    let child = command(agent.to_str().unwrap(), &args, &[], &home).spawn();
    let child = child.expect("run the agent's binary");
    let pid = child.id();
    let out = child.wait_with_output().expect("its output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, format!("pid: {pid}\n"));
}

#[test]
fn without_the_binary_beside_an_old_subcommand_exits_2_naming_it() {
    let dir = folder_with_the_agent("absent");
    let agent = dir.join("selfdestruct");
    for (subcommand, binary) in [
        ("node-gate", "selfdestruct-node-gate"),
        ("schedule", "selfdestruct-schedule"),
    ] {
        let (code, out) = run_program_to_exit(agent.to_str().unwrap(), &[subcommand], &[]);
        assert_eq!(code, Some(2), "{out}");
        let missing = dir.join(binary);
        assert!(
            out.contains(&format!(
                "`selfdestruct {subcommand}` runs {}, which cannot be run: No such file",
                missing.display()
            )),
            "{out}"
        );
    }
}

/// The real gate through the old subcommand: its settings, its exit 2 naming the
/// variable.
#[test]
fn selfdestruct_node_gate_still_runs_the_gate() {
    let (code, out) = run_to_exit(&["node-gate"], &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("NODE_NAME"), "{out}");
    assert!(out.contains("deprecated"), "{out}");
}
