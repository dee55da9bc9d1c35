// Links libleases: from $LEASES_LIB_DIR, else the checkout's build/ (or
// build/test/ with the `testing` feature, the library with the test seam).
// The rpath lets test binaries find the library without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LEASES_LIB_DIR");

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let testing = env::var_os("CARGO_FEATURE_TESTING").is_some();
    let dir = match env::var_os("LEASES_LIB_DIR").filter(|v| !v.is_empty()) {
        // A relative LEASES_LIB_DIR is relative to this crate (cargo runs
        // build scripts there); make passes an absolute one.
        Some(d) => manifest.join(d),
        None => {
            let build = manifest.join("..").join("..").join("build");
            if testing {
                build.join("test")
            } else {
                build
            }
        }
    };
    let dir = dir.canonicalize().unwrap_or(dir);

    if !dir.join("libleases.so").exists() {
        println!(
            "cargo:warning=libleases.so not found in {}; run `make build/libleases.so` (or build/test/libleases.so for --features testing) or set LEASES_LIB_DIR",
            dir.display()
        );
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=leases");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // Dependent build scripts can read DEP_LEASES_LIB_DIR.
    println!("cargo:lib_dir={}", dir.display());
}
