// The worker links libleases.so (the crate's `dynamic` feature), the library
// make demo has built already; the rpath lets it find the library at run
// time without LD_LIBRARY_PATH (docs/rust.md, "Linking").
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_LEASES_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_LEASES_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
