//! How a session is named outside its transport: the stable id hooks, audit records and traces
//! see, and the name logs give it. Both are derived from the `Mcp-Session-Id`, never the
//! header itself (on an unauthenticated front it is the credential). Below `shared_store`,
//! `session` and `http`, which all name sessions this way.

/// The id hooks see for the HTTP session whose `Mcp-Session-Id` is `mcp_session_id`: `http-`
/// and 24 hex digits of the id's SHA-256. Every replica derives the same one, so audit records,
/// logs and traces of one session agree wherever it was served; it is not the header itself,
/// which is what a client presents to use the session and must not spread to every model,
/// audit file and trace.
pub(crate) fn stable_id(mcp_session_id: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, mcp_session_id.as_bytes());
    let mut id = String::with_capacity(5 + 24);
    id.push_str("http-");
    for byte in &digest.as_ref()[..12] {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// How logs name the session whose store id is `id`: a stateful HTTP session by its
/// [`stable_id`], the same as its hooks and traces and never the `Mcp-Session-Id` itself (on an
/// unauthenticated front it is the credential); a stateless session (`stateless:` and a
/// digest, no credential) by its id.
pub(crate) fn log_id(id: &str) -> String {
    if id.starts_with("stateless:") {
        id.to_owned()
    } else {
        stable_id(id)
    }
}

#[cfg(test)]
mod tests {
    use super::{log_id, stable_id};

    #[test]
    fn logs_name_a_session_by_its_stable_id_and_a_stateless_one_by_its_digest() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(log_id(id), stable_id(id));
        assert_eq!(log_id("stateless:00ff"), "stateless:00ff");
    }

    #[test]
    fn the_stable_id_is_derived_from_the_session_id_and_does_not_contain_it() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            stable_id(id),
            stable_id(id),
            "every replica derives the same"
        );
        assert_ne!(stable_id(id), stable_id("0123456789abcdef0123456789abcdee"));
        assert!(stable_id(id).starts_with("http-") && stable_id(id).len() == 29);
        assert!(!stable_id(id).contains(&id[..8]));
    }
}
