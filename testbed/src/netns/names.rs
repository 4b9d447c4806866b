//! Names of the namespaces and interfaces a [`Lab`](super::Lab) creates.
//!
//! Every object carries the project prefix [`PREFIX`] and the creating process id, so that
//! parallel tests (threads of one process, or several processes) never collide and so that
//! `testbed down` can tell a crashed run's leftovers (owner process gone) from a live run's.
//!
//! * Namespace: `qtb-<pid>-<lab>-<tag>-<name>` (decimal pid and lab counter). Namespace names
//!   are file names under `/run/netns`, so they may be long.
//! * Interface in the initial namespace: `qtb` + pid (5 base-36 digits) + lab counter (3
//!   base-36 digits) + link counter (2 base-36 digits) = 13 characters, within Linux's
//!   `IFNAMSIZ - 1` = 15.
//!
//! Interfaces inside a lab's namespaces keep the short names the caller chose (`eth0`, `p1`):
//! each namespace has its own interface name space.

/// Prefix of everything the testbed creates in the kernel.
pub const PREFIX: &str = "qtb";

/// Longest interface name Linux accepts (`IFNAMSIZ` = 16 including the NUL).
pub const IFNAME_MAX: usize = 15;

/// Longest namespace name the testbed accepts (a file name under `/run/netns`).
pub const NSNAME_MAX: usize = 200;

const PID_DIGITS: usize = 5;
const LAB_DIGITS: usize = 3;
const LINK_DIGITS: usize = 2;

/// Error for a name the kernel or `ip` would refuse, or that would be ambiguous.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid name {name:?}: {reason}")]
pub struct NameError {
    /// The rejected name.
    pub name: String,
    /// Why it was rejected.
    pub reason: &'static str,
}

/// Checks a caller-chosen short name (a lab tag, a namespace or an interface name inside a
/// namespace): 1-15 characters from `[A-Za-z0-9_.]`, not `.` or `..`.
pub fn check_short(name: &str) -> Result<(), NameError> {
    let err = |reason| {
        Err(NameError {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return err("empty");
    }
    if name.len() > IFNAME_MAX {
        return err("longer than 15 characters");
    }
    if name == "." || name == ".." {
        return err("reserved");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    {
        return err("only letters, digits, '_' and '.' are allowed");
    }
    Ok(())
}

/// The name prefix of one lab: `qtb-<pid>-<lab>-<tag>`.
pub fn lab_prefix(pid: u32, lab: u32, tag: &str) -> String {
    format!("{PREFIX}-{pid}-{lab}-{tag}")
}

/// The full namespace name of `name` in the lab with prefix `lab_prefix`.
pub fn ns_name(lab_prefix: &str, name: &str) -> String {
    format!("{lab_prefix}-{name}")
}

/// The name of the `link`-th interface a lab creates in the initial namespace.
///
/// The lab and link counters wrap (at 36^3 and 36^2); names collide only if a process holds
/// more than 46 656 labs or one lab more than 1 296 root-side links at once.
pub fn root_ifname(pid: u32, lab: u32, link: u32) -> String {
    let mut s = String::with_capacity(IFNAME_MAX);
    s.push_str(PREFIX);
    push_base36(&mut s, u64::from(pid), PID_DIGITS);
    push_base36(&mut s, u64::from(lab), LAB_DIGITS);
    push_base36(&mut s, u64::from(link), LINK_DIGITS);
    s
}

/// The process id that created a namespace, if `name` is a testbed namespace name.
pub fn owner_of_ns(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?.strip_prefix('-')?;
    let pid = rest.split('-').next()?;
    pid.parse().ok()
}

/// The process id that created an interface in the initial namespace, if `name` is a testbed
/// root-side interface name.
pub fn owner_of_root_if(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    if rest.len() != PID_DIGITS + LAB_DIGITS + LINK_DIGITS {
        return None;
    }
    let pid = u64::from_str_radix(rest.get(..PID_DIGITS)?, 36).ok()?;
    u32::try_from(pid).ok()
}

/// Appends `v` in base 36 (lower case), keeping the low `digits` digits, zero padded.
fn push_base36(s: &mut String, v: u64, digits: usize) {
    const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut buf = [b'0'; 16];
    let mut v = v;
    for slot in buf.iter_mut().take(digits).rev() {
        // `v % 36` < 36, so the index is in range.
        *slot = ALPHABET[(v % 36) as usize];
        v /= 36;
    }
    for &b in &buf[..digits] {
        s.push(char::from(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_ifname_fits_and_roundtrips_pid() {
        // Linux's largest possible pid_max is 2^22.
        for pid in [1, 42, 65_535, 4_194_304] {
            for lab in [0, 1, 46_655, 46_656, u32::MAX] {
                for link in [0, 1, 1_295, 1_296] {
                    let n = root_ifname(pid, lab, link);
                    assert!(n.len() <= IFNAME_MAX, "{n}");
                    assert_eq!(n.len(), 13);
                    assert_eq!(owner_of_root_if(&n), Some(pid));
                    assert!(n.bytes().all(|b| b.is_ascii_alphanumeric()));
                }
            }
        }
    }

    #[test]
    fn root_ifnames_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for lab in 0..50 {
            for link in 0..50 {
                assert!(seen.insert(root_ifname(1234, lab, link)));
            }
        }
        assert_ne!(root_ifname(1, 23, 0), root_ifname(12, 3, 0));
    }

    #[test]
    fn ns_names_carry_owner() {
        let p = lab_prefix(777, 3, "fwd");
        assert_eq!(p, "qtb-777-3-fwd");
        let n = ns_name(&p, "h1");
        assert_eq!(n, "qtb-777-3-fwd-h1");
        assert_eq!(owner_of_ns(&n), Some(777));
        assert_eq!(owner_of_ns("other-777"), None);
        assert_eq!(owner_of_ns("qtbx-1"), None);
        assert_eq!(owner_of_ns("qtb-x-1"), None);
        assert_eq!(owner_of_root_if("eth0"), None);
        assert_eq!(owner_of_root_if("qtb"), None);
        assert_eq!(owner_of_root_if("qtb0000000000000"), None);
    }

    #[test]
    fn short_names_checked() {
        assert!(check_short("h1").is_ok());
        assert!(check_short("eth0.100").is_ok());
        assert!(check_short("a_b").is_ok());
        assert!(check_short("").is_err());
        assert!(check_short("..").is_err());
        assert!(check_short("a-b").is_err());
        assert!(check_short("a/b").is_err());
        assert!(check_short("a b").is_err());
        assert!(check_short("0123456789abcdef").is_err());
        assert!(check_short("0123456789abcde").is_ok());
    }
}
