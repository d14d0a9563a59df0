//! The store's revision: a number that every write which changed something raises by one,
//! kept in `$MCPCTL_HOME/revision`. A proxy that follows the store says which revision it runs
//! ([`super::running`]), so a command that wrote can wait until its change is in force.

use std::path::Path;

use super::error::StoreError;
use super::files;

/// The file, in the store's directory.
pub(crate) const FILE: &str = "revision";

/// The store in `root`'s revision now: 0 before the first counted write (and for a file that
/// does not hold a number, which only a hand edit makes: the next write starts over at 1).
pub(crate) fn read(root: &Path) -> u64 {
    std::fs::read_to_string(root.join(FILE))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// Raises the revision by one and returns it. Call with the store's write lock held, after the
/// write it counts (a proxy that reads the new revision then reads the new files).
pub(crate) fn bump(root: &Path) -> Result<u64, StoreError> {
    let next = read(root).saturating_add(1);
    files::write_atomic(&root.join(FILE), &format!("{next}\n"))?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bump_raises_the_revision_by_one_from_zero() {
        let root = std::env::temp_dir().join(format!("mcpctl-revision-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        assert_eq!(read(&root), 0);
        assert_eq!(bump(&root).unwrap(), 1);
        assert_eq!(bump(&root).unwrap(), 2);
        assert_eq!(read(&root), 2);
        std::fs::write(root.join(FILE), "not a number").unwrap();
        assert_eq!(read(&root), 0);
        assert_eq!(bump(&root).unwrap(), 1);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
