// The leases crate's rpath applies to its own targets only; this binary gets
// the same library directory through the crate's `links` metadata.
fn main() {
    if let Ok(dir) = std::env::var("DEP_LEASES_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
