//! The errors of the proxy core, each saying which side failed.

use std::io;

use rmcp::model::ErrorData;

/// What a hook returns: its result, or the JSON-RPC error the client receives. Also what the
/// [`Context`](crate::Context)'s calls return. Re-exported as `model::HookResult` and at the
/// crate root.
pub type HookResult<T> = Result<T, ErrorData>;

/// An upstream server could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The child process could not be started.
    // The cause is part of the message (not a `source`), so a report that prints the chain
    // (anyhow's `{:#}`) does not say it twice.
    #[error("could not start upstream server `{server}`: {cause}")]
    Spawn {
        /// The command line, as configured (`${env:VAR}` references unresolved).
        server: String,
        /// Why it could not start.
        cause: io::Error,
    },
}

/// Why a proxy stopped serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The upstream could not be started when the proxy started.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The downstream (client) side could not be set up or written.
    #[error("downstream {what}: {cause}")]
    Downstream {
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        cause: io::Error,
    },
    /// The HTTP front could not listen on its address.
    #[error("could not listen on {addr}: {cause}")]
    Listen {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why the operating system refused.
        cause: io::Error,
    },
    /// No model of that name is linked into this binary.
    #[error("unknown proxy model `{name}`; the models in this binary are: {known}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The names that exist, comma separated.
        known: String,
    },
    /// Two models registered the same name.
    #[error(
        "two proxy models are named `{name}` (from {first} and {second}); model names must be unique"
    )]
    DuplicateModel {
        /// The shared name.
        name: &'static str,
        /// Where the first one was defined.
        first: &'static str,
        /// Where the second one was defined.
        second: &'static str,
    },
    /// A model's configuration was refused when the proxy started.
    #[error("config of proxy model `{model}`{}: {message}", field.as_ref().map(|f| format!(", field `{f}`")).unwrap_or_default())]
    Config {
        /// The model whose config was refused.
        model: String,
        /// The field, when the error is about one (a path such as `budget.bytes`).
        field: Option<String>,
        /// What was wrong.
        message: String,
    },
    /// A shared store was configured, but a model's `State` cannot be stored (it is not serde).
    #[error(
        "proxy model `{model}` keeps a `State` that is not serde (Serialize + Deserialize), so \
         the shared store cannot carry it between replicas; derive serde on it or serve without \
         a shared store"
    )]
    StateNotStorable {
        /// The model.
        model: String,
    },
}
