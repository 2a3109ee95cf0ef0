//! Structured log lines on stderr: one per decision, as `key=value` text
//! or one JSON object per line.
//!
//! ```
//! use kfd_preemptd::{config::LogFormat, log::{Level, Logger}};
//! use serde_json::json;
//!
//! let log = Logger::new(LogFormat::Text);
//! let line = log.format_line(1.5, Level::Info, "preempt", &[("queues", json!(8)), ("reason", json!("lc-busy"))]);
//! assert_eq!(line, "ts=1.500000 level=info event=preempt queues=8 reason=lc-busy");
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::config::{LogFormat, LogLevel};

pub mod writer;

use writer::LineQueue;

/// How much a line matters, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// A decision or a state change.
    Info,
    /// Something failed, and the daemon carries on.
    Warn,
    /// Something failed that stops the daemon.
    Error,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

impl From<LogLevel> for Level {
    fn from(l: LogLevel) -> Level {
        match l {
            LogLevel::Info => Level::Info,
            LogLevel::Warn => Level::Warn,
        }
    }
}

/// Writes log lines to stderr, from the calling thread or through the log
/// thread ([`crate::log::writer`]).
#[derive(Debug, Clone)]
pub struct Logger {
    format: LogFormat,
    /// Lines of lower levels are not written.
    least: Level,
    /// The log thread's queue; `None`: written by the caller.
    queue: Option<LineQueue>,
}

impl Logger {
    /// A logger writing `format` from the calling thread.
    pub fn new(format: LogFormat) -> Self {
        Logger {
            format,
            least: Level::Info,
            queue: None,
        }
    }

    /// A logger handing its lines to a log thread.
    pub(crate) fn queued(format: LogFormat, queue: LineQueue) -> Self {
        Logger {
            format,
            least: Level::Info,
            queue: Some(queue),
        }
    }

    /// This logger, writing only lines of `least` and above.
    pub fn at_least(self, least: Level) -> Self {
        Logger { least, ..self }
    }

    /// Writes one line: the wall-clock time, the level, the event and the
    /// fields in the order given.
    pub fn log(&self, level: Level, event: &str, fields: &[(&str, Value)]) {
        if level < self.least {
            return;
        }
        let line = self.line(level, event, fields);
        let line = match &self.queue {
            Some(q) => match q.push(line) {
                Ok(()) => return,
                // The log thread has ended (the daemon is stopping) or
                // panicked.
                Err(line) => line,
            },
            None => line,
        };
        // One write per line, so that lines from a restart or another
        // writer on the same journal stream do not interleave; a closed
        // stderr is not a reason to stop scheduling.
        #[cfg(not(test))]
        let _ = std::io::Write::write_all(
            &mut std::io::stderr().lock(),
            format!("{line}\n").as_bytes(),
        );
        // The test harness captures only what the print macros write.
        #[cfg(test)]
        eprintln!("{line}");
    }

    /// The line [`log`](Self::log) writes now.
    pub fn line(&self, level: Level, event: &str, fields: &[(&str, Value)]) -> String {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.format_line(ts, level, event, fields)
    }

    /// The line [`log`](Self::log) writes, for a given time (seconds since
    /// the Unix epoch).
    pub fn format_line(
        &self,
        ts: f64,
        level: Level,
        event: &str,
        fields: &[(&str, Value)],
    ) -> String {
        match self.format {
            LogFormat::Json => {
                let mut m = Map::new();
                m.insert("ts".into(), Value::from((ts * 1e6).round() / 1e6));
                m.insert("level".into(), level.as_str().into());
                m.insert("event".into(), event.into());
                for (k, v) in fields {
                    m.insert((*k).to_owned(), v.clone());
                }
                Value::Object(m).to_string()
            }
            LogFormat::Text => {
                let mut s = format!("ts={ts:.6} level={} event={event}", level.as_str());
                for (k, v) in fields {
                    s.push(' ');
                    s.push_str(k);
                    s.push('=');
                    s.push_str(&text_value(v));
                }
                s
            }
        }
    }
}

/// A value as `key=value` text writes it: plain if that cannot be
/// misread, JSON-quoted otherwise.
fn text_value(v: &Value) -> String {
    match v {
        Value::String(s)
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_graphic() && c != '"' && c != '=') =>
        {
            s.clone()
        }
        Value::Null => "-".to_owned(),
        v => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_quotes_only_what_needs_it() {
        let l = Logger::new(LogFormat::Text);
        let line = l.format_line(
            2.0,
            Level::Warn,
            "attach",
            &[
                ("comm", json!("my server")),
                ("pid", json!(42)),
                ("error", json!("a=b")),
                ("latency_us", Value::Null),
            ],
        );
        assert_eq!(
            line,
            "ts=2.000000 level=warn event=attach comm=\"my server\" pid=42 error=\"a=b\" latency_us=-"
        );
    }

    #[test]
    fn json_lines_parse_back() {
        let l = Logger::new(LogFormat::Json);
        let line = l.format_line(3.25, Level::Info, "resume", &[("queues", json!(4))]);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["event"], "resume");
        assert_eq!(v["queues"], 4);
        assert_eq!(v["ts"], 3.25);
        assert_eq!(v["level"], "info");
    }
}
