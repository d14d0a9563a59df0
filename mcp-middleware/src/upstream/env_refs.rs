//! `${env:VAR}` in server definitions: resolved from the proxy's environment only when
//! the proxy starts the server, so the value never reaches logs, errors or descriptions, which
//! all show the definition as written.

use std::ffi::{OsStr, OsString};

/// The names of the variables `${env:NAME}` references in `text`, in order (an unterminated
/// reference names nothing).
///
/// ```
/// use mcp_middleware::upstream::env_references;
///
/// let names: Vec<&str> = env_references("Bearer ${env:TOKEN} (${env:USER})").collect();
/// assert_eq!(names, ["TOKEN", "USER"]);
/// ```
pub fn env_references(text: &str) -> impl Iterator<Item = &str> {
    text.split("${env:")
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

/// Replaces every `${env:NAME}` in `text` with the variable's value. Fails with the name of the
/// first variable that is not set (never with a value).
pub(crate) fn resolve(text: &OsStr) -> Result<OsString, String> {
    let Some(text) = text.to_str() else {
        // Not UTF-8: it cannot contain a reference written in a YAML file.
        return Ok(text.to_owned());
    };
    if !text.contains("${env:") {
        return Ok(text.into());
    }
    let mut out = OsString::new();
    let mut rest = text;
    while let Some(start) = rest.find("${env:") {
        out.push(&rest[..start]);
        let after = &rest[start + "${env:".len()..];
        let Some(end) = after.find('}') else {
            return Err(format!("an unterminated `${{env:` in `{text}`"));
        };
        let name = &after[..end];
        match std::env::var_os(name) {
            Some(value) => out.push(value),
            None => return Err(format!("the environment variable `{name}` is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_replaced_and_missing_ones_named() {
        // A variable no environment sets.
        let name = "MCP_MIDDLEWARE_ENV_REFS_TEST";
        let path = std::env::var_os("PATH").unwrap_or_default();
        let resolved = resolve(OsStr::new("a ${env:PATH} b")).unwrap();
        let mut expected = OsString::from("a ");
        expected.push(&path);
        expected.push(" b");
        assert_eq!(resolved, expected);
        let err = resolve(OsStr::new(&format!("x${{env:{name}}}"))).unwrap_err();
        assert!(err.contains(name), "{err}");
        assert_eq!(resolve(OsStr::new("plain")).unwrap(), "plain");
        assert!(resolve(OsStr::new("${env:OPEN")).is_err());
        assert_eq!(env_references("${env:A}${env:B").collect::<Vec<_>>(), ["A"]);
    }
}
