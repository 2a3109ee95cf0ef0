//! The tenant side of `detect`, run as a separate process (`kfdp-scenario
//! detect-tenant`, hidden) so that it shares nothing with the measuring
//! side but the kernel, and the measuring side's end of the pipes.
//!
//! Protocol, one line each way over the child's stdin and stdout:
//! * tenant: `ready QUEUE_ID GPU_ID` once its ring exists;
//! * measurer: `submit DELAY_NS TAG`: the tenant sleeps DELAY_NS, then
//!   submits one dispatch tagged TAG, and answers `submitted PUBLISH_NS
//!   INDEX` (PUBLISH_NS: CLOCK_MONOTONIC just before the packet is
//!   published) or `error MESSAGE`;
//! * the measurer closes stdin: the tenant exits, destroying its ring.
//!
//! The tenant sleeps the gap itself so that the submission happens at a
//! moment unrelated to the measuring loop's phase: a poller that sent the
//! request and then started polling would always see it one period later.

use std::{
    io::{self, BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use kfd_preempt::sim::SimTenant;
use rustix::{
    event::{poll, PollFd, PollFlags},
    io::Errno,
    time::Timespec,
};

use crate::{clock::now_ns, Result};

/// Priority of the probed ring (any: it is alone on the node).
const PRIORITY: u32 = 9;
/// Ring size: one dispatch is outstanding at a time.
const RING_PACKETS: u32 = 16;
/// How long the tenant may take to create its ring.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the tenant may take to exit once its stdin is closed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(2);

/// A request the measuring side sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submit {
    /// How long the tenant sleeps before submitting.
    pub delay: Duration,
    /// The dispatch's tag.
    pub tag: u64,
}

impl Submit {
    fn line(&self) -> String {
        format!("submit {} {}", crate::clock::ns(self.delay), self.tag)
    }

    fn parse(line: &str) -> std::result::Result<Self, String> {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("submit"), Some(delay), Some(tag), None) => Ok(Submit {
                delay: Duration::from_nanos(
                    delay
                        .parse()
                        .map_err(|_| format!("bad delay in {line:?}"))?,
                ),
                tag: tag.parse().map_err(|_| format!("bad tag in {line:?}"))?,
            }),
            _ => Err(format!("unknown request {line:?}")),
        }
    }
}

/// What the tenant answered to a [`Submit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// CLOCK_MONOTONIC ns just before the write index was published.
    pub published_ns: u64,
    /// The packet's index in the ring.
    pub index: u64,
}

/// Parses `ready QUEUE_ID GPU_ID`.
fn parse_ready(line: &str) -> Result<(u32, u32)> {
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("ready"), Some(q), Some(g), None) => Ok((
            q.parse()
                .map_err(|_| format!("tenant: bad queue id in {line:?}"))?,
            g.parse()
                .map_err(|_| format!("tenant: bad gpu_id in {line:?}"))?,
        )),
        _ => Err(format!("tenant: expected \"ready QUEUE GPU\", got {line:?}").into()),
    }
}

/// Parses `submitted PUBLISH_NS INDEX` or `error MESSAGE`.
fn parse_submitted(line: &str) -> Result<Submitted> {
    if let Some(message) = line.strip_prefix("error ") {
        return Err(format!("tenant: {message}").into());
    }
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("submitted"), Some(t), Some(i), None) => Ok(Submitted {
            published_ns: t
                .parse()
                .map_err(|_| format!("tenant: bad time in {line:?}"))?,
            index: i
                .parse()
                .map_err(|_| format!("tenant: bad index in {line:?}"))?,
        }),
        _ => Err(format!("tenant: expected \"submitted T INDEX\", got {line:?}").into()),
    }
}

/// Runs the tenant process: one ring on node `node`, dispatches of
/// `work_ns` of node time, until stdin closes.
pub fn run_tenant(node: u32, work_ns: u64) -> Result<()> {
    let tenant = SimTenant::open()?;
    let ring = tenant.create_ring(node, PRIORITY, RING_PACKETS)?;
    let q = ring.queue();
    let work = Duration::from_nanos(work_ns);
    let mut out = io::stdout().lock();
    writeln!(out, "ready {} {}", q.queue_id, q.gpu_id)?;
    out.flush()?;
    for line in io::stdin().lock().lines() {
        let reply = match Submit::parse(&line?) {
            Ok(req) => {
                sleep(req.delay);
                // Just before submit, which writes the packet (a few
                // stores) and then publishes the write index: the closest
                // this side can stamp the moment work becomes visible.
                let published_ns = now_ns();
                match ring.submit(&[(work, req.tag)]) {
                    Ok(index) => format!("submitted {published_ns} {index}"),
                    Err(e) => format!("error {e}"),
                }
            }
            Err(e) => format!("error {e}"),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

/// `d` as a Timespec, saturating.
pub fn timespec(d: Duration) -> Timespec {
    Timespec::try_from(d).unwrap_or(Timespec {
        tv_sec: i64::MAX,
        tv_nsec: 0,
    })
}

/// The measuring side's handle on a tenant process. Dropping it closes the
/// tenant's stdin and reaps it (killing it if it does not exit).
#[derive(Debug)]
pub struct TenantProc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The tenant's ring: queue id.
    pub queue_id: u32,
    /// The tenant's ring: gpu_id of its node.
    pub gpu_id: u32,
}

impl TenantProc {
    /// Starts this program's `detect-tenant` on node `node`.
    pub fn spawn(node: u32, work_ns: u64) -> Result<Self> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this program to run the tenant: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "detect-tenant",
            "--node",
            &node.to_string(),
            "--work-ns",
            &work_ns.to_string(),
        ]);
        Self::start(cmd)
    }

    /// Starts `cmd` as the tenant and waits for its `ready` line.
    pub fn start(mut cmd: Command) -> Result<Self> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the tenant process: {e}"))?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the tenant process has no pipes".into());
            }
        };
        let mut t = TenantProc {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            queue_id: 0,
            gpu_id: 0,
        };
        // On error `t` drops here, which reaps the child.
        let line = t.read_line(READY_TIMEOUT)?;
        (t.queue_id, t.gpu_id) = parse_ready(&line)?;
        Ok(t)
    }

    /// The tenant's pid.
    pub fn pid(&self) -> Result<i32> {
        i32::try_from(self.child.id()).map_err(|_| "the tenant's pid does not fit an i32".into())
    }

    /// Whether the tenant is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Asks for one dispatch after `req.delay`; the answer comes with
    /// [`reply`](Self::reply).
    pub fn request(&mut self, req: Submit) -> Result<()> {
        let stdin = self.stdin.as_mut().ok_or("the tenant's stdin is closed")?;
        writeln!(stdin, "{}", req.line())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to the tenant (did it exit?): {e}"))?;
        Ok(())
    }

    /// The tenant's answer to the last [`request`](Self::request).
    pub fn reply(&mut self, timeout: Duration) -> Result<Submitted> {
        parse_submitted(&self.read_line(timeout)?)
    }

    /// One line from the tenant, without its newline, waiting at most
    /// `timeout` for it to start arriving.
    fn read_line(&mut self, timeout: Duration) -> Result<String> {
        // A line already buffered needs no wait; otherwise poll, so that a
        // tenant that hangs costs a timeout rather than the whole run.
        if !self.stdout.buffer().contains(&b'\n') {
            let deadline = Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(format!(
                        "the tenant did not answer within {} ms",
                        timeout.as_millis()
                    )
                    .into());
                }
                let mut fds = [PollFd::new(self.stdout.get_ref(), PollFlags::IN)];
                match poll(&mut fds, Some(&timespec(left))) {
                    Ok(0) | Err(Errno::INTR) => continue,
                    Ok(_) => break,
                    Err(e) => return Err(format!("polling the tenant's stdout: {e}").into()),
                }
            }
        }
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .map_err(|e| format!("reading from the tenant: {e}"))?;
        if n == 0 {
            return Err("the tenant process exited (see its message above)".into());
        }
        Ok(line.trim_end().to_string())
    }
}

impl Drop for TenantProc {
    fn drop(&mut self) {
        // EOF on its stdin is the tenant's signal to go.
        drop(self.stdin.take());
        let deadline = Instant::now() + EXIT_TIMEOUT;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => sleep(Duration::from_millis(10)),
            }
        }
        // Still there: it is our child, ended by its own pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_lines_round_trip_and_reject_garbage() {
        let req = Submit {
            delay: Duration::from_micros(2_500),
            tag: 7,
        };
        assert_eq!(req.line(), "submit 2500000 7");
        assert_eq!(Submit::parse(&req.line()), Ok(req));
        for bad in [
            "",
            "submit",
            "submit 1",
            "submit x 1",
            "submit 1 2 3",
            "quit",
        ] {
            assert!(Submit::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_ready("ready 3 20736").unwrap(), (3, 20736));
        assert!(parse_ready("ready 3").is_err());
        assert_eq!(
            parse_submitted("submitted 123 4").unwrap(),
            Submitted {
                published_ns: 123,
                index: 4
            }
        );
        let e = parse_submitted("error no free slot")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "tenant: no free slot");
        assert!(parse_submitted("submitted -1 4").is_err());
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_scripted_tenant_talks_the_protocol() {
        let mut t = TenantProc::start(sh(
            "echo ready 2 20736; read verb delay tag; echo submitted $delay $tag; read verb",
        ))
        .unwrap();
        assert_eq!((t.queue_id, t.gpu_id), (2, 20736));
        assert!(t.pid().unwrap() > 0);
        assert!(t.alive());
        // The script echoes the request's delay and tag back.
        t.request(Submit {
            delay: Duration::from_nanos(1234),
            tag: 5,
        })
        .unwrap();
        assert_eq!(
            t.reply(Duration::from_secs(5)).unwrap(),
            Submitted {
                published_ns: 1234,
                index: 5
            }
        );
        // Dropping closes stdin: the script's last read ends and it exits.
    }

    #[test]
    fn a_silent_or_dead_tenant_is_an_error_not_a_hang() {
        let start = Instant::now();
        let mut t = TenantProc::start(sh("echo ready 0 1; exec sleep 30")).unwrap();
        let e = t.reply(Duration::from_millis(100)).unwrap_err().to_string();
        assert!(e.contains("did not answer"), "{e}");
        // The sleeper ignores stdin: dropping kills it after EXIT_TIMEOUT.
        drop(t);
        assert!(start.elapsed() < Duration::from_secs(10));
        let e = TenantProc::start(sh("exit 1")).unwrap_err().to_string();
        assert!(e.contains("exited"), "{e}");
        let e = TenantProc::start(sh("echo hello")).unwrap_err().to_string();
        assert!(e.contains("expected \"ready"), "{e}");
    }
}
