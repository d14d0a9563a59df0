//! Name patterns for tools, resources and prompts: an exact name, or a glob where `*` matches
//! any run of characters (also none) and `?` exactly one. Used by models' configs (gate's
//! always-visible tools) and by routing (hidden and pass-through paths).

use serde::{Deserialize, Serialize};

/// An exact name or a glob.
///
/// ```
/// use mcp_middleware::pattern::Pattern;
///
/// assert!(Pattern::new("get-*").matches("get-sum"));
/// assert!(Pattern::new("echo").matches("echo"));
/// assert!(!Pattern::new("echo").matches("echo2"));
/// assert!(Pattern::new("file?.txt").matches("file1.txt"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Pattern(String);

impl Pattern {
    /// The pattern `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        if !self.0.contains(['*', '?']) {
            return self.0 == name;
        }
        glob(
            &self.0.chars().collect::<Vec<_>>(),
            &name.chars().collect::<Vec<_>>(),
        )
    }
}

/// Whether any of `patterns` matches `name`.
pub fn any_matches(patterns: &[Pattern], name: &str) -> bool {
    patterns.iter().any(|pattern| pattern.matches(name))
}

/// Iterative glob matching with one backtrack point: linear in practice, never exponential.
fn glob(pattern: &[char], name: &[char]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(c) if *c == '?' || *c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("a*c", "abbbc", true),
            ("a*c", "abbb", false),
            ("*-sum", "get-sum", true),
            ("get-*-x", "get-a-b-x", true),
            ("??", "ab", true),
            ("??", "abc", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("ü*", "über", true),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(
                Pattern::new(pattern).matches(name),
                expected,
                "{pattern} vs {name}"
            );
        }
    }
}
