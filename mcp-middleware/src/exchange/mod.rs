//! The bookkeeping of one hop of a message exchange, shared by the session, a `ServerSet`'s
//! merger and the HTTP front: request ids in both directions ([`IdMap`], `id_map.rs`) and the
//! handshake memory with its replay ([`Handshake`], `handshake.rs`). Plain data that names no
//! session, upstream or front, so each of those can use it without importing the others.

pub(crate) mod handshake;
mod id_map;

pub(crate) use handshake::{Handshake, Step};
pub(crate) use id_map::{IdMap, IdSource, Waiting, swap_progress_token, swap_progress_token_in};
