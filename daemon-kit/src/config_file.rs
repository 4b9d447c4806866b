//! Reading a configuration file with a size bound.
//!
//! A configuration of this project is a few kilobytes: the largest built-in scenario is under
//! 4 KiB, and a switch with the 4094 ports a VLAN space allows still fits in well under 1 MiB of
//! TOML. A file larger than [`MAX_CONFIG_BYTES`] is refused before it is read, so a wrong path
//! (a log, a disk image, `/dev/zero`) gives one clear message instead of a parser chewing on
//! megabytes or the process growing without bound.

use std::io::Read;
use std::path::Path;

/// The largest configuration file read, in octets (1 MiB; see the module comment).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads `path` as UTF-8 text of at most [`MAX_CONFIG_BYTES`] octets. The error names neither
/// the path nor the program: the caller prefixes both.
pub fn read(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    // Read one octet past the bound: a file (or a device) that yields more is refused without
    // ever holding more than the bound in memory.
    let n = file
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if n as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "larger than {MAX_CONFIG_BYTES} octets: not a configuration file"
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_small_file_is_read_whole() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"buffer = \"150KB\"\n").unwrap();
        assert_eq!(read(f.path()).unwrap(), "buffer = \"150KB\"\n");
    }

    #[test]
    fn a_file_one_octet_over_the_bound_is_refused() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&vec![b'#'; MAX_CONFIG_BYTES as usize]).unwrap();
        assert!(read(f.path()).is_ok());
        f.write_all(b"#").unwrap();
        let e = read(f.path()).unwrap_err();
        assert!(e.contains("larger than 1048576 octets"), "{e}");
    }

    #[test]
    fn an_endless_device_is_refused_without_reading_it_all() {
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("larger than"), "{e}");
    }

    #[test]
    fn a_missing_file_says_so() {
        assert!(read(Path::new("/nonexistent/qcn.toml")).is_err());
    }
}
