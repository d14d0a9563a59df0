//! The web UI at `/ui/`: a small static app (one page, one script, one style sheet, embedded
//! with `include_str!`) that draws everything from the JSON API. Chosen over server-rendered
//! templates because the API is the product here: the UI is one more client of it (so every
//! screen is something curl can do too), it needs no template engine or build step, and it
//! changes by editing three plain files in `ui/`.
//!
//! Login: `/ui/?token=T` once, or the page's form (`POST /ui/login`): a valid token gets the
//! UI-session cookie and a redirect to `/ui/`, which removes the token from the address bar and
//! history.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Response, StatusCode, header};

use super::AdminState;
use super::api::Body;
use super::auth::COOKIE_NAME;

const PAGE: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/style.css");

fn asset(text: &'static str, content_type: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// The page.
pub(crate) fn page() -> Response<Body> {
    asset(PAGE, "text/html; charset=utf-8")
}

/// Its script.
pub(crate) fn script() -> Response<Body> {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

/// Its style sheet.
pub(crate) fn style() -> Response<Body> {
    asset(STYLE, "text/css; charset=utf-8")
}

/// `303 See Other` to `to`.
pub(crate) fn redirect(to: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = StatusCode::SEE_OTHER;
    response
        .headers_mut()
        .insert(header::LOCATION, header::HeaderValue::from_static(to));
    response
}

/// Logs in with `token`: the cookie and a redirect to `/ui/` when the token is valid, else a
/// redirect to the login form saying it was not.
pub(crate) fn login_with(state: &AdminState, token: &str) -> Response<Body> {
    let Some(id) = state.auth.open_ui(token.trim()) else {
        return redirect("/ui/#login-failed");
    };
    let mut response = redirect("/ui/");
    let cookie = format!("{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/");
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// After `POST /ui/logout`: the cookie cleared.
pub(crate) fn logged_out() -> Response<Body> {
    let mut response =
        super::api::json_response(StatusCode::OK, &serde_json::json!({"loggedOut": true}));
    let cookie = format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
