//! [`TokenList`]: static bearer tokens mapped to subjects, from code or from a file that is
//! read again whenever it changes (removing a line revokes its token).

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::AuthError;

/// A token's SHA-256: the list keeps digests only, never the tokens themselves.
type Digest = [u8; 32];

/// Bearer tokens, each naming the subject it authenticates.
///
/// A token list is given in code ([`TokenList::new`] and [`with_token`](Self::with_token)) or
/// read from a file ([`TokenList::from_file`]). The file has one token per line: the subject,
/// white space, then the token, or `sha256:` and the token's SHA-256 in hex so the file does
/// not hold the token itself. Blank lines and lines starting with `#` are skipped. A subject
/// may have several tokens (to rotate them); one token may not name two subjects.
///
/// ```text
/// # subject   token
/// alice       4f9c0a7e1d2b4c6a8e0f1a3b5c7d9e2f
/// ci-bot      sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
/// ```
///
/// **Revocation.** Before every lookup the file's metadata (size, modification and change
/// times, inode) is compared with what was read last: one `stat` per request. When it changed,
/// the file is read again, so removing a token's line (or replacing the file) revokes the token
/// for the next request, including requests of sessions it already opened. A file that has
/// become unreadable or malformed revokes every token (fail closed: a typo while revoking one
/// token must not keep it alive) and logs the error with the file's path and line, until the
/// file is fixed.
///
/// Only SHA-256 digests of the tokens are kept in memory and compared; tokens never reach a
/// log or an error message.
///
/// ```
/// use mcp_middleware::auth::TokenList;
///
/// let tokens = TokenList::new()
///     .with_token("alice", "a-long-random-token-for-alice")
///     .with_token("bob", "a-long-random-token-for-bob");
/// assert_eq!(tokens.subject_of("a-long-random-token-for-bob").as_deref(), Some("bob"));
/// assert_eq!(tokens.subject_of("guess"), None);
///
/// let parsed = TokenList::parse("# from a file\nalice  a-long-random-token-for-alice\n").unwrap();
/// assert_eq!(parsed.len(), 1);
/// ```
#[derive(Clone)]
pub struct TokenList {
    source: Arc<Source>,
}

enum Source {
    Fixed(HashMap<Digest, String>),
    File(Watched),
}

/// A token file and what was last read from it.
struct Watched {
    path: PathBuf,
    state: Mutex<Loaded>,
}

struct Loaded {
    stamp: Option<Stamp>,
    /// The tokens, or empty when the file could not be read (fail closed).
    tokens: HashMap<Digest, String>,
}

/// What tells a changed file: any write changes the times or size, a replacement the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        Ok(Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

impl fmt::Debug for TokenList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.source {
            Source::Fixed(tokens) => f
                .debug_struct("TokenList")
                .field("tokens", &tokens.len())
                .finish(),
            Source::File(watched) => f
                .debug_struct("TokenList")
                .field("file", &watched.path)
                .finish(),
        }
    }
}

impl Default for TokenList {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenList {
    /// An empty list, to fill with [`with_token`](Self::with_token).
    pub fn new() -> Self {
        Self {
            source: Arc::new(Source::Fixed(HashMap::new())),
        }
    }

    /// Adds `token`, which authenticates `subject`. On a list read from a file this starts a
    /// fixed list with the file's current tokens and this one (the file is no longer watched).
    pub fn with_token(self, subject: impl Into<String>, token: impl AsRef<str>) -> Self {
        let mut tokens = self.snapshot();
        tokens.insert(digest(token.as_ref()), subject.into());
        Self {
            source: Arc::new(Source::Fixed(tokens)),
        }
    }

    /// A fixed list from text in the file format (see the type's docs).
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let tokens = parse(text, Path::new("(text)"))?;
        Ok(Self {
            source: Arc::new(Source::Fixed(tokens)),
        })
    }

    /// The list in `path`, read now (an error if it cannot be read or is malformed) and again
    /// whenever it changes.
    pub fn from_file(path: impl Into<PathBuf>) -> Result<Self, AuthError> {
        let path = path.into();
        let stamp = Stamp::of(&path).map_err(|cause| AuthError::Read {
            path: path.clone(),
            cause,
        })?;
        let tokens = read(&path)?;
        Ok(Self {
            source: Arc::new(Source::File(Watched {
                path,
                state: Mutex::new(Loaded {
                    stamp: Some(stamp),
                    tokens,
                }),
            })),
        })
    }

    /// How many tokens the list holds now.
    pub fn len(&self) -> usize {
        match &*self.source {
            Source::Fixed(tokens) => tokens.len(),
            Source::File(watched) => watched.current(|tokens| tokens.len()),
        }
    }

    /// Whether the list holds no token now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The subject `token` authenticates, if the list holds it now.
    pub fn subject_of(&self, token: &str) -> Option<String> {
        let digest = digest(token);
        match &*self.source {
            Source::Fixed(tokens) => tokens.get(&digest).cloned(),
            Source::File(watched) => watched.current(|tokens| tokens.get(&digest).cloned()),
        }
    }

    fn snapshot(&self) -> HashMap<Digest, String> {
        match &*self.source {
            Source::Fixed(tokens) => tokens.clone(),
            Source::File(watched) => watched.current(HashMap::clone),
        }
    }
}

impl Watched {
    /// Runs `f` on the tokens, reading the file again first if it changed.
    fn current<R>(&self, f: impl FnOnce(&HashMap<Digest, String>) -> R) -> R {
        let stamp = Stamp::of(&self.path);
        let mut state = match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        let now = stamp.as_ref().ok().copied();
        if now != state.stamp || now.is_none() {
            let reloaded = match stamp {
                Ok(_) => read(&self.path),
                Err(cause) => Err(AuthError::Read {
                    path: self.path.clone(),
                    cause,
                }),
            };
            let changed = now != state.stamp;
            state.stamp = now;
            match reloaded {
                Ok(tokens) => {
                    if changed {
                        tracing::info!(file = %self.path.display(), tokens = tokens.len(), "token list read again");
                    }
                    state.tokens = tokens;
                }
                Err(err) => {
                    if changed {
                        tracing::error!(
                            "{err}; every token of the list is refused until it is fixed"
                        );
                    }
                    state.tokens.clear();
                }
            }
        }
        f(&state.tokens)
    }
}

fn read(path: &Path) -> Result<HashMap<Digest, String>, AuthError> {
    let text = std::fs::read_to_string(path).map_err(|cause| AuthError::Read {
        path: path.to_owned(),
        cause,
    })?;
    parse(&text, path)
}

fn parse(text: &str, path: &Path) -> Result<HashMap<Digest, String>, AuthError> {
    let mut tokens = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |message: &str| AuthError::TokenFile {
            path: path.to_owned(),
            line: index + 1,
            message: message.to_owned(),
        };
        let mut fields = line.split_whitespace();
        let (Some(subject), Some(token), None) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(bad("expected `SUBJECT TOKEN` (two fields)"));
        };
        let digest = match token.strip_prefix("sha256:") {
            Some(hex) => from_hex(hex)
                .ok_or_else(|| bad("a `sha256:` entry needs 64 hex digits after it"))?,
            None => {
                if !token.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(bad("a token is visible ASCII characters"));
                }
                self::digest(token)
            }
        };
        match tokens.get(&digest) {
            Some(other) if other != subject => {
                return Err(bad(&format!(
                    "this token is already the token of `{other}`; a token names one subject"
                )));
            }
            _ => {
                tokens.insert(digest, subject.to_owned());
            }
        }
    }
    Ok(tokens)
}

fn digest(token: &str) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    out
}

fn from_hex(hex: &str) -> Option<Digest> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_map_tokens_to_subjects() {
        let hashed = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        let list = TokenList::parse(&format!(
            "# comment\n\nalice  tok-a\nalice tok-a2\nbob {hashed}\n"
        ))
        .unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list.subject_of("tok-a").as_deref(), Some("alice"));
        assert_eq!(list.subject_of("tok-a2").as_deref(), Some("alice"));
        assert_eq!(list.subject_of("hello").as_deref(), Some("bob"));
        assert_eq!(list.subject_of("tok-b"), None);
    }

    #[test]
    fn mistakes_name_the_line() {
        let err = TokenList::parse("alice tok\nbob\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("SUBJECT TOKEN"),
            "{err}"
        );
        let err = TokenList::parse("a x\nb x\n").unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("`a`"), "{err}");
        assert!(!err.contains(" x"), "the token is not repeated: {err}");
        let err = TokenList::parse("a sha256:12\n").unwrap_err().to_string();
        assert!(err.contains("64 hex digits"), "{err}");
    }

    #[test]
    fn a_changed_file_is_read_again_and_a_broken_one_refuses_everything() {
        let dir = std::env::temp_dir().join(format!("mcp-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, "alice tok-a\nbob tok-b\n").unwrap();
        let list = TokenList::from_file(&path).unwrap();
        assert_eq!(list.subject_of("tok-b").as_deref(), Some("bob"));
        std::fs::write(&path, "alice tok-a\n").unwrap();
        assert_eq!(
            list.subject_of("tok-b"),
            None,
            "removing the line revokes it"
        );
        assert_eq!(list.subject_of("tok-a").as_deref(), Some("alice"));
        std::fs::write(&path, "alice tok-a\nbroken\n").unwrap();
        assert_eq!(list.subject_of("tok-a"), None, "fail closed");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(list.subject_of("tok-a"), None);
        std::fs::write(&path, "alice tok-a\n").unwrap();
        assert_eq!(list.subject_of("tok-a").as_deref(), Some("alice"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
