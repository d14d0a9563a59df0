//! `default`: `gate`, then `paginate`; the model `gated: true` maps to.

use mcp_middleware::proxy_model;

use crate::{gate, paginate};

/// Gates each session until `begin_session`, and returns large results a page at a time.
///
/// The chain is `default -> gate -> paginate -> server`. A new session sees only
/// `begin_session` (see `gate`); once it is open, the upstream's tools and `read_page` are
/// listed, and every text larger than `paginate.pageBytes` comes back as page 1 with a footer
/// naming the `read_page` cursor of page 2 (see `paginate`). `gate` hooks `tools/list` and
/// `tools/call`, `paginate` only transforms content and adds `read_page`, so the two compose
/// without a conflict. Configure each under its own name (`gate.alwaysVisible`,
/// `paginate.pageBytes`, ...).
#[proxy_model(extends = [gate, paginate])]
pub mod default {}
