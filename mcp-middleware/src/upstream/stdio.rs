//! An upstream MCP server run as a child process, spoken to over its stdin and stdout.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::ReaderOut;
use super::env_refs::{self, env_references};
use super::environment::EnvPolicy;
use super::event::{AnswerTail, UpstreamEvent};
use super::link::UpstreamLink;
use super::parent_death;
use crate::error::UpstreamError;
use std::sync::Arc;

use crate::transport::cut_through::{
    CUT_AT, CUT_MIN_LIMIT, Claimed, CutThrough, TAIL_PIECES, TailPiece, Utf8Pieces,
};
use crate::transport::lines::{Part, Piece};
use crate::transport::pipe_writer;
use crate::transport::{Frame, LineReader};

/// How to start an upstream MCP server as a child process.
///
/// The child's environment is what its [`EnvPolicy`] lets through from the proxy's (by default
/// only the variables the official MCP SDKs pass: `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`,
/// `USER`) plus the variables set here; it runs in the proxy's working directory unless one is
/// set. Its stderr goes to the proxy's stderr, its stdin and stdout carry the protocol.
/// `${env:VAR}` in the command, arguments, environment values or directory is replaced by the
/// proxy's variable when the child starts; everything that describes the server shows
/// it as written. A variable the policy denies is never given to the child, by any of these.
///
/// The child's stderr is passed through as it is: the proxy never logs a resolved value itself,
/// but it cannot stop a child from printing what it was given.
///
/// ```
/// use mcp_middleware::upstream::{EnvPolicy, StdioServer};
/// let server = StdioServer::new("node")
///     .args(["dist/index.js", "stdio"])
///     .env("LOG_LEVEL", "debug")
///     .env("API_TOKEN", "${env:EVERYTHING_TOKEN}")
///     .env_policy(EnvPolicy::sdk_default().allow("LANG").deny("AUDIT_KEY"))
///     .current_dir("/srv/everything");
/// assert_eq!(server.to_string(), "node dist/index.js stdio");
/// assert!(server.policy().denies("AUDIT_KEY"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioServer {
    command: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    policy: EnvPolicy,
    current_dir: Option<PathBuf>,
    era_record: Option<super::EraRecord>,
}

impl StdioServer {
    /// A server started by running `command` (looked up on `PATH` like a shell would).
    pub fn new(command: impl Into<OsString>) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            env: Vec::new(),
            policy: EnvPolicy::default(),
            current_dir: None,
            era_record: None,
        }
    }

    /// Records the protocol era this server is seen speaking in `record` (for `describe`).
    pub fn era_record(mut self, record: super::EraRecord) -> Self {
        self.era_record = Some(record);
        self
    }

    pub(crate) fn era_record_of(&self) -> Option<&super::EraRecord> {
        self.era_record.as_ref()
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the child, on top of what its [`EnvPolicy`] inherits.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Which of the proxy's variables the child inherits and which it never gets
    /// ([`EnvPolicy::sdk_default`] unless set).
    pub fn env_policy(mut self, policy: EnvPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The child's environment policy.
    pub fn policy(&self) -> &EnvPolicy {
        &self.policy
    }

    /// Runs the child in `dir` instead of the proxy's working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// The program that is run.
    pub fn command(&self) -> &OsStr {
        &self.command
    }

    pub(crate) fn spawn(
        &self,
        generation: u64,
        max_line: usize,
        events: ReaderOut,
    ) -> Result<UpstreamLink, UpstreamError> {
        // `${env:VAR}` is resolved here and only here: the definition as written is what
        // `Display`, logs and errors show.
        let resolve = |text: &OsStr| {
            env_refs::resolve(text).map_err(|problem| UpstreamError::Spawn {
                server: self.to_string(),
                cause: std::io::Error::other(problem),
            })
        };
        self.check_denied()?;
        let mut command = Command::new(resolve(&self.command)?);
        for arg in &self.args {
            command.arg(resolve(arg)?);
        }
        command
            .env_clear()
            .envs(self.policy.inherited(std::env::vars_os()));
        for (key, value) in &self.env {
            command.env(key, resolve(value)?);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        parent_death::die_with_parent(&mut command);
        if let Some(dir) = &self.current_dir {
            command.current_dir(resolve(dir.as_os_str())?);
        }
        let mut child = command.spawn().map_err(|cause| UpstreamError::Spawn {
            server: self.to_string(),
            cause,
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(UpstreamError::Spawn {
                server: self.to_string(),
                cause: std::io::Error::other("the child's stdin or stdout was not piped"),
            });
        };
        tracing::info!(server = %self, pid = child.id(), generation, "started upstream");
        let name = self.to_string();
        let outgoing =
            pipe_writer::spawn(stdin, name.clone()).map_err(|cause| UpstreamError::Spawn {
                server: name.clone(),
                cause,
            })?;
        let reader = LineReader::new(stdout, max_line);
        // Small limits mean small messages only: every line is then checked whole.
        let cut = (max_line >= CUT_MIN_LIMIT).then(Arc::<CutThrough>::default);
        let task = tokio::spawn(read_upstream(
            name,
            child,
            reader,
            generation,
            events,
            cut.clone(),
        ));
        let link = UpstreamLink::new(outgoing, task);
        Ok(match cut {
            Some(cut) => link.with_cut_through(cut),
            None => link,
        })
    }
}

impl StdioServer {
    /// Fails, naming the variable, when the definition would hand the child a denied variable:
    /// declared under its own name, or copied through `${env:VAR}` into a declared variable,
    /// an argument, the command or the directory.
    fn check_denied(&self) -> Result<(), UpstreamError> {
        let refuse = |what: String, name: &str| {
            Err(UpstreamError::Spawn {
                server: self.to_string(),
                cause: std::io::Error::other(format!(
                    "{what} would give it `{name}`, a variable this proxy keeps from its servers \
                     (it holds a secret the proxy uses itself)"
                )),
            })
        };
        if let Some((key, _)) = self.env.iter().find(|(key, _)| self.policy.denies(key)) {
            return refuse(
                "the environment it declares".to_owned(),
                &key.to_string_lossy(),
            );
        }
        let mut texts: Vec<(String, &OsStr)> = vec![("its command".to_owned(), &self.command)];
        texts.extend(
            self.args
                .iter()
                .map(|arg| ("its arguments".to_owned(), arg.as_os_str())),
        );
        texts.extend(self.env.iter().map(|(key, value)| {
            let what = format!("its variable `{}`", key.to_string_lossy());
            (what, value.as_os_str())
        }));
        if let Some(dir) = &self.current_dir {
            texts.push(("its directory".to_owned(), dir.as_os_str()));
        }
        for (what, text) in texts {
            let Some(text) = text.to_str() else { continue };
            if let Some(name) = env_references(text).find(|name| self.policy.denies(name)) {
                return refuse(what, name);
            }
        }
        Ok(())
    }
}

impl fmt::Display for StdioServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.command.to_string_lossy())?;
        for arg in &self.args {
            write!(f, " {}", arg.to_string_lossy())?;
        }
        Ok(())
    }
}

async fn read_upstream(
    name: String,
    mut child: Child,
    mut reader: LineReader<tokio::process::ChildStdout>,
    generation: u64,
    events: ReaderOut,
    cut: Option<Arc<CutThrough>>,
) {
    loop {
        let mut claimed = None;
        let piece = match &cut {
            Some(cut) => {
                reader
                    .next_piece(CUT_AT, |head| {
                        claimed = cut.claim(head);
                        claimed.is_some()
                    })
                    .await
            }
            None => reader
                .next_line()
                .await
                .map(|frame| frame.map(Piece::Frame)),
        };
        let frame = match piece {
            Ok(Some(Piece::Frame(frame))) => frame,
            Ok(Some(Piece::Head(head))) => {
                let Some(claimed) = claimed else { break };
                match cut_through(&name, &mut reader, head, claimed, generation, &events).await {
                    Streamed::Done => continue,
                    Streamed::SessionGone => return,
                    Streamed::UpstreamEnded => break,
                }
            }
            Ok(None) => break,
            Err(err) => {
                tracing::warn!(server = %name, %err, "reading the upstream's stdout failed");
                break;
            }
        };
        match frame {
            Frame::Line(line) => {
                if !events.send(UpstreamEvent::Line { generation, line }).await {
                    return;
                }
            }
            Frame::TooLong {
                len,
                id,
                has_method,
            } => {
                tracing::warn!(server = %name, len, "upstream wrote a line over the size limit; dropped it");
                // A response the client cannot be given: it gets an error in its place now,
                // rather than waiting for the request timeout.
                if let Some(id) = id.filter(|_| !has_method) {
                    let line = crate::jsonrpc::error(
                        Some(&id),
                        crate::jsonrpc::INTERNAL_ERROR,
                        &over_limit(&name, len, reader.max_len()),
                    );
                    if !events.send(UpstreamEvent::Line { generation, line }).await {
                        return;
                    }
                }
            }
            Frame::NotUtf8 { at } => {
                tracing::warn!(server = %name, at, "upstream wrote a line that is not UTF-8; dropped it");
            }
        }
    }
    // The child closed stdout: give it a moment to exit so the report can say how it ended.
    let how = match tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
        Ok(Ok(status)) => describe_exit(status),
        Ok(Err(err)) => format!("closed its stdout ({err})"),
        Err(_) => {
            let _ = child.start_kill();
            "closed its stdout and was killed".to_owned()
        }
    };
    tracing::debug!(server = %name, generation, "upstream {how}");
    let _ = events.send(UpstreamEvent::Closed { generation, how }).await;
}

fn over_limit(name: &str, len: usize, max: usize) -> String {
    format!(
        "upstream `{name}` answered with a message of {len} bytes, over the proxy's limit of \
         {max} bytes (max_message_bytes)"
    )
}

/// How cutting a line through ended.
enum Streamed {
    /// The line ended (whole, or cut short with an error for its request); reading goes on.
    Done,
    /// The session is gone.
    SessionGone,
    /// The upstream closed its stdout inside the line (its request got an error).
    UpstreamEnded,
}

/// Forwards a claimed answer while it arrives: its head (with the client's id) to the
/// session, which queues it for the client, and its rest piece by piece through a bounded
/// channel to the client's writer. What cannot be completed (over the limit, not UTF-8, the
/// upstream closing) is ended where it is and followed by an error for the request; an answer
/// the session no longer wants is read to its end and dropped.
async fn cut_through(
    name: &str,
    reader: &mut LineReader<tokio::process::ChildStdout>,
    head: Vec<u8>,
    claimed: Claimed,
    generation: u64,
    events: &ReaderOut,
) -> Streamed {
    let spliced = claimed.splice_head(&head);
    drop(head);
    let Claimed { uid, client_id, .. } = claimed;
    let mut utf8 = Utf8Pieces::default();
    let (tx, tail) = mpsc::channel(TAIL_PIECES);
    let fail =
        |why: String| crate::jsonrpc::error(Some(&client_id), crate::jsonrpc::INTERNAL_ERROR, &why);
    let mut sink = Some(tx);
    match utf8.text(spliced) {
        Ok(head) => {
            tracing::debug!(server = %name, uid, "cutting a large answer through");
            let event = UpstreamEvent::Streamed {
                generation,
                uid,
                head,
                tail: AnswerTail(tail),
            };
            if !events.send(event).await {
                return Streamed::SessionGone;
            }
        }
        Err(at) => {
            tracing::warn!(server = %name, at, "upstream wrote a line that is not UTF-8; dropped it");
            sink = None;
            let line = fail(format!(
                "upstream `{name}` answered with a message that is not UTF-8"
            ));
            if !events.send(UpstreamEvent::Line { generation, line }).await {
                return Streamed::SessionGone;
            }
        }
    }
    // Sends one piece; a tail nobody reads any more (the session dropped the answer) is let go
    // and the line read to its end.
    async fn give(sink: &mut Option<mpsc::Sender<TailPiece>>, piece: TailPiece) {
        if let Some(tx) = sink.as_ref()
            && tx.send(piece).await.is_err()
        {
            *sink = None;
        }
    }
    loop {
        let part = match reader.next_part().await {
            Ok(part) => part,
            Err(err) => {
                tracing::warn!(server = %name, %err, "reading the upstream's stdout failed");
                Part::Eof
            }
        };
        match part {
            // The answer is dropped: its rest is only read past.
            Part::More(_) if sink.is_none() => {}
            Part::Last(_) if sink.is_none() => return Streamed::Done,
            Part::More(bytes) => match utf8.text(bytes) {
                Ok(text) => give(&mut sink, TailPiece::Part(text)).await,
                Err(at) => {
                    tracing::warn!(server = %name, at, "upstream wrote a line that is not UTF-8; cut it short");
                    let why =
                        format!("upstream `{name}` answered with a message that is not UTF-8");
                    give(&mut sink, TailPiece::Abort(fail(why))).await;
                    sink = None;
                }
            },
            Part::Last(bytes) => {
                match utf8.text(bytes) {
                    Ok(text) if !utf8.incomplete() => {
                        give(&mut sink, TailPiece::Part(text)).await;
                        give(&mut sink, TailPiece::End).await;
                    }
                    _ => {
                        tracing::warn!(server = %name, "upstream wrote a line that is not UTF-8; cut it short");
                        let why =
                            format!("upstream `{name}` answered with a message that is not UTF-8");
                        give(&mut sink, TailPiece::Abort(fail(why))).await;
                    }
                }
                return Streamed::Done;
            }
            Part::TooLong { len } => {
                tracing::warn!(server = %name, len, "upstream wrote a line over the size limit; cut it short");
                let why = format!(
                    "upstream `{name}` answered with a message of more than {max} bytes, over \
                     the proxy's limit of {max} bytes (max_message_bytes); {len} bytes of it \
                     had been forwarded",
                    max = reader.max_len()
                );
                give(&mut sink, TailPiece::Abort(fail(why))).await;
                return Streamed::Done;
            }
            Part::Eof => {
                let why =
                    format!("upstream `{name}` closed its output in the middle of its answer");
                give(&mut sink, TailPiece::Abort(fail(why))).await;
                return Streamed::UpstreamEnded;
            }
        }
    }
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "exited".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denied_variable_cannot_be_declared_or_copied_in() {
        let policy = EnvPolicy::sdk_default().deny("AUDIT_KEY");
        let refused = |server: StdioServer| {
            server
                .env_policy(policy.clone())
                .check_denied()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let err = refused(StdioServer::new("x").env("AUDIT_KEY", "v"));
        assert!(
            err.contains("the environment it declares would give it `AUDIT_KEY`"),
            "{err}"
        );
        let err = refused(StdioServer::new("x").env("OTHER", "k=${env:AUDIT_KEY}"));
        assert!(err.contains("its variable `OTHER`"), "{err}");
        let err = refused(StdioServer::new("x").arg("--key=${env:AUDIT_KEY}"));
        assert!(err.contains("its arguments"), "{err}");
        assert!(
            StdioServer::new("x")
                .env("OTHER", "${env:HOME}")
                .env_policy(policy)
                .check_denied()
                .is_ok()
        );
    }
}
