//! [`CurrentIdentity`]: who a session acts as now. A session belongs to one principal for its
//! whole life, but what that principal may do follows the credential each request presents: a
//! token of the same principal with fewer scopes (or other claims) narrows the session from its
//! next request, one with more widens it. Routing restrictions and hooks read the identity
//! from here, never the one the session started with.

use std::sync::{Arc, RwLock};

use super::Identity;

/// The identity a session's latest request authenticated as, shared by the front that
/// authenticates requests and the session that routes them.
#[derive(Debug)]
pub(crate) struct CurrentIdentity(RwLock<Arc<Identity>>);

impl CurrentIdentity {
    /// A session's identity as its first request presented it.
    pub(crate) fn new(identity: Identity) -> Self {
        Self(RwLock::new(Arc::new(identity)))
    }

    /// The identity to decide the next request on.
    pub(crate) fn get(&self) -> Arc<Identity> {
        match self.0.read() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Runs `f` on the identity to decide the next request on, without taking a copy (what
    /// the session does for every request it routes).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Identity) -> R) -> R {
        match self.0.read() {
            Ok(held) => f(&held),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    /// Takes `identity`, which a request of the session was just authenticated as, as the
    /// session's from now on. Only an identity of the session's own principal is taken: the
    /// front never hands a session to another principal, and this is the second lock on that
    /// door (another principal's credential keeps what the session had).
    pub(crate) fn present(&self, identity: &Identity) {
        let mut held = match self.0.write() {
            Ok(held) => held,
            Err(poisoned) => poisoned.into_inner(),
        };
        if **held != *identity && held.principal() == identity.principal() {
            *held = Arc::new(identity.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn jwt(scope: &str) -> Identity {
        let Value::Object(claims) = json!({"sub": "alice", "scope": scope}) else {
            unreachable!()
        };
        Identity::Jwt {
            subject: "alice".into(),
            issuer: Some("https://issuer".into()),
            claims,
        }
    }

    #[test]
    fn a_narrower_credential_of_the_same_principal_replaces_the_old_one() {
        let current = CurrentIdentity::new(jwt("read admin"));
        current.present(&jwt("read"));
        assert_eq!(*current.get(), jwt("read"));
        current.present(&jwt("read admin"));
        assert_eq!(*current.get(), jwt("read admin"));
    }

    #[test]
    fn another_principal_is_never_taken() {
        let current = CurrentIdentity::new(jwt("read"));
        current.present(&Identity::Token {
            subject: "mallory".into(),
        });
        let Identity::Jwt { claims, .. } = &*current.get() else {
            panic!("the session's identity changed kind");
        };
        assert_eq!(claims.get("scope"), Some(&Value::from("read")));
    }
}
