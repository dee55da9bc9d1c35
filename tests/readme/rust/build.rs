// The leases crate's rpath reaches only its own targets: this binary sets its
// own, to the directory the leases build script linked against.
fn main() {
    if let Ok(dir) = std::env::var("DEP_LEASES_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
