//! Library and ABI versions.

use std::ffi::c_char;

/// Major version of this header and library.
pub const HOLDOFF_VERSION_MAJOR: u32 = 0;
/// Minor version of this header and library.
pub const HOLDOFF_VERSION_MINOR: u32 = 1;
/// Patch version of this header and library.
pub const HOLDOFF_VERSION_PATCH: u32 = 0;
/// `MAJOR * 1000000 + MINOR * 1000 + PATCH`, for preprocessor comparisons.
pub const HOLDOFF_VERSION_NUMBER: u32 =
    HOLDOFF_VERSION_MAJOR * 1_000_000 + HOLDOFF_VERSION_MINOR * 1_000 + HOLDOFF_VERSION_PATCH;
/// The ABI this header describes. Bumped on every incompatible change of a signature, struct
/// layout or enum value. Compare it with `holdoff_abi_version()` at start-up: a library built
/// for another ABI must not be used (holdoff promises no ABI stability before 1.0; link it
/// statically).
pub const HOLDOFF_ABI_VERSION: u32 = 6;

/// The library's version, e.g. `"0.1.0"`. Static string; do not free.
#[no_mangle]
pub extern "C" fn holdoff_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The ABI version the library was built with: equal to `HOLDOFF_ABI_VERSION` when header and
/// library match.
#[no_mangle]
pub extern "C" fn holdoff_abi_version() -> u32 {
    HOLDOFF_ABI_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_match_cargo_version() {
        let parse = |s: &str| s.parse::<u32>().unwrap();
        assert_eq!(HOLDOFF_VERSION_MAJOR, parse(env!("CARGO_PKG_VERSION_MAJOR")));
        assert_eq!(HOLDOFF_VERSION_MINOR, parse(env!("CARGO_PKG_VERSION_MINOR")));
        assert_eq!(HOLDOFF_VERSION_PATCH, parse(env!("CARGO_PKG_VERSION_PATCH")));
        let number = parse(env!("CARGO_PKG_VERSION_MAJOR")) * 1_000_000
            + parse(env!("CARGO_PKG_VERSION_MINOR")) * 1_000
            + parse(env!("CARGO_PKG_VERSION_PATCH"));
        assert_eq!(HOLDOFF_VERSION_NUMBER, number);
        // SAFETY: a static NUL-terminated literal.
        let v = unsafe { std::ffi::CStr::from_ptr(holdoff_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
