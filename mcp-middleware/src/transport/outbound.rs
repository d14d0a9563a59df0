//! Outbound records: what the session says about a message it writes for the client, so a
//! transport that must place it (HTTP's per-request streams) need not read it again.
//!
//! stdio ignores the record (every message goes to stdout). HTTP uses it to put a response on
//! its request's stream without parsing the line, and a request the server sent while serving
//! a client request on that request's stream. Where the session says nothing
//! ([`Belongs::Unsaid`]), the transport reads the message as before.

/// Which client request a message for the client belongs to, by the id the session knows the
/// request by (raw JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Belongs {
    /// Not said: the transport finds out from the message.
    #[default]
    Unsaid,
    /// The response to request `id` (the message is a result or an error with that id).
    Response(Box<str>),
    /// A request the upstream sent while serving request `id` (sampling, elicitation, ...).
    During(Box<str>),
}
