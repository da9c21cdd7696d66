//! Gives the shared library its soname on Linux, as cargo-c would: `libholdoff.so.<major>`, or
//! `libholdoff.so.0.<minor>` before 1.0, where every minor version may change the ABI. Programs
//! linked with `-lholdoff` record that name and load it through the versioned symlink that
//! `run.sh install` and the `dist` tarballs ship. The static library is not affected.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let var = |name| std::env::var(name).expect("set by cargo");
        let major = var("CARGO_PKG_VERSION_MAJOR");
        let abi = if major == "0" {
            format!("0.{}", var("CARGO_PKG_VERSION_MINOR"))
        } else {
            major
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libholdoff.so.{abi}");
    }
}
