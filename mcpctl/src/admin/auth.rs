//! Who may use the admin listener: a bearer token from `--admin-tokens` (the `--tokens` file
//! format, read again when it changes: [`TokenList`]), or the web UI's cookie.
//!
//! The UI logs in once with a token (`/ui/?token=T` or the login form) and gets a cookie
//! naming a server-side UI session (128 random bits; `HttpOnly; SameSite=Strict; Path=/`):
//! the token itself never reaches the browser's storage. Each UI session remembers the token
//! it was opened with and is checked against the token file on every request, so revoking the
//! token ends its UI sessions too. A cookie-authenticated request that changes something
//! (anything but GET and HEAD) must also carry the UI session's CSRF token in `X-Admin-CSRF`
//! (the page reads it from `GET /api/whoami`); bearer requests need none (a browser does not
//! add an `Authorization` header by itself).

use std::collections::HashMap;
use std::sync::Mutex;

use hyper::header::{AUTHORIZATION, COOKIE, HeaderMap};
use mcp_middleware::auth::TokenList;
use subtle::ConstantTimeEq;

/// The cookie's name.
pub(crate) const COOKIE_NAME: &str = "mcpctl_admin";
/// The header a cookie-authenticated mutating request must carry.
pub(crate) const CSRF_HEADER: &str = "x-admin-csrf";
/// How many UI sessions are kept (the oldest is forgotten past that).
const MAX_UI_SESSIONS: usize = 1024;

/// Who a request authenticated as, and how.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The token's subject.
    pub(crate) subject: String,
    /// The UI session's CSRF token, when the cookie authenticated it.
    pub(crate) csrf: Option<String>,
}

struct UiSession {
    token: String,
    csrf: String,
    opened: std::time::Instant,
}

/// The admin token list and the UI sessions opened with its tokens.
pub(crate) struct AdminAuth {
    tokens: TokenList,
    ui: Mutex<HashMap<String, UiSession>>,
}

impl AdminAuth {
    pub(crate) fn new(tokens: TokenList) -> Self {
        Self {
            tokens,
            ui: Mutex::new(HashMap::new()),
        }
    }

    /// The caller `headers` authenticate, if any: a bearer token first, else the cookie.
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Option<Caller> {
        if let Some(value) = headers.get(AUTHORIZATION) {
            let token = value.to_str().ok()?.strip_prefix("Bearer ")?.trim();
            return self.tokens.subject_of(token).map(|subject| Caller {
                subject,
                csrf: None,
            });
        }
        let id = cookie(headers, COOKIE_NAME)?;
        let ui = self.ui.lock().unwrap_or_else(|p| p.into_inner());
        let session = ui.get(&id)?;
        let subject = self.tokens.subject_of(&session.token)?;
        Some(Caller {
            subject,
            csrf: Some(session.csrf.clone()),
        })
    }

    /// Opens a UI session for `token`, if the file holds it: the cookie's value.
    pub(crate) fn open_ui(&self, token: &str) -> Option<String> {
        self.tokens.subject_of(token)?;
        let id = random_hex()?;
        let csrf = random_hex()?;
        let mut ui = self.ui.lock().unwrap_or_else(|p| p.into_inner());
        if ui.len() >= MAX_UI_SESSIONS
            && let Some(oldest) = ui
                .iter()
                .min_by_key(|(_, s)| s.opened)
                .map(|(k, _)| k.clone())
        {
            ui.remove(&oldest);
        }
        ui.insert(
            id.clone(),
            UiSession {
                token: token.to_owned(),
                csrf,
                opened: std::time::Instant::now(),
            },
        );
        Some(id)
    }

    /// Ends the UI session the cookie in `headers` names.
    pub(crate) fn close_ui(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers, COOKIE_NAME) {
            self.ui
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        }
    }
}

impl Caller {
    /// Whether a mutating request may go ahead: bearer callers always, cookie callers with the
    /// right `X-Admin-CSRF` (compared in constant time).
    pub(crate) fn may_change(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.csrf else {
            return true;
        };
        let Some(given) = headers.get(CSRF_HEADER).map(|v| v.as_bytes()) else {
            return false;
        };
        bool::from(given.ct_eq(expected.as_bytes()))
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

/// 128 random bits in hex.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
