//! `ctrack replay --reload N:FILE`: the argument's parsed form.

use std::path::PathBuf;

/// `--reload N:FILE`: the policy in FILE takes over before packet `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reload {
    /// The packet (from 1) the new policy applies to first.
    pub at: u64,
    /// The policy file.
    pub path: PathBuf,
}

/// Parses `--reload`'s `N:FILE`.
pub(crate) fn parse_reload(s: &str) -> Result<Reload, String> {
    let expected = || {
        format!(
            "`{s}`: expected N:FILE, a packet number from 1 and a policy file, as in 100:new.toml"
        )
    };
    let (n, path) = s.split_once(':').ok_or_else(expected)?;
    let at: u64 = n.trim().parse().map_err(|_| expected())?;
    if at == 0 || path.is_empty() {
        return Err(expected());
    }
    Ok(Reload {
        at,
        path: PathBuf::from(path),
    })
}
