//! Child processes that cannot outlive the test process.
//!
//! Three guards, each enough on its own for one way a run ends:
//! - [`Proc`]'s `Drop` kills the child's process group (a test that returns or panics);
//! - every child is started with `PR_SET_PDEATHSIG = SIGKILL` (the kernel kills it when the
//!   test process dies, even by SIGKILL). The signal follows the *thread* that forked, so
//!   every child is forked by one spawner thread that lives as long as the process;
//! - an `atexit` hook kills what is still registered and removes the registered folders (the
//!   test harness ends the process with `exit`, which drops no `static`).

use std::collections::BTreeSet;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// Process groups and folders to clean up at exit.
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
static AT_EXIT: Once = Once::new();

extern "C" fn at_exit() {
    if let Ok(live) = LIVE.lock() {
        for pgid in live.iter() {
            // SAFETY: kill(2) with a process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    if let Ok(dirs) = DIRS.lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn register_at_exit() {
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(at_exit) };
    });
}

/// Removes `dir` at process exit (unless removed before).
pub fn remove_at_exit(dir: &Path) {
    register_at_exit();
    DIRS.lock().unwrap().push(dir.to_path_buf());
}

fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("realstack-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the spawner thread");
        Mutex::new(tx)
    })
}

/// A child in its own process group, killed with its group on drop.
#[derive(Debug)]
pub struct Proc {
    /// What it is (for messages).
    pub name: String,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
    child: Child,
    exited: Option<ExitStatus>,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr appended to `log`, in a new process group, with
    /// the parent-death signal set.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> io::Result<Proc> {
        register_at_exit();
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // SAFETY: getpid before fork; the closure only makes async-signal-safe calls.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpgid(0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl.
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
                Ok(())
            });
        }
        let (tx, rx) = mpsc::channel();
        spawner()
            .lock()
            .unwrap()
            .send((cmd, tx))
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
        let child = rx
            .recv()
            .map_err(|_| io::Error::other("the spawner thread is gone"))??;
        LIVE.lock().unwrap().insert(child.id() as i32);
        Ok(Proc {
            name: name.to_string(),
            log: log.to_path_buf(),
            child,
            exited: None,
        })
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status, if it has exited (reaps it).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Sends `signal` to the process (not its group), as a container runtime does to PID 1.
    pub fn signal(&self, signal: i32) {
        if self.exited.is_none() {
            // SAFETY: kill(2) on our own, not yet reaped child.
            unsafe { libc::kill(self.child.id() as i32, signal) };
        }
    }

    /// SIGTERM, then SIGKILL to the group after `grace`; waits for the exit.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        self.exited
    }

    /// SIGKILL to the whole group, and reaps the child.
    pub fn kill(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: kill(2) on the group we created.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        if self.exited.is_none() {
            self.exited = self.child.wait().ok();
        }
        LIVE.lock().unwrap().remove(&pgid);
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log, n)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
