// Links libleases into the crate, so a depending crate needs no build script
// of its own (docs/rust.md, "Linking"). Like libgit2-sys and rusqlite, it
// links an installed library by default and builds one only when asked:
// - default: the static archive libleases.a of an installed libleases, from
//   $LEASES_LIB_DIR when set, else the libdir of pkg-config's `leases-static`
//   (a `make install` prefix's lib/pkgconfig on PKG_CONFIG_PATH). Needs
//   neither Go nor the network;
// - feature `bundled`: builds libleases.a from the Go sources by mk/golib.sh
//   (the copy `cargo package` ships in golib/, or the checkout this crate
//   lives in): needs Go 1.26+ and a C compiler, and go fetches the library's
//   Go modules;
// - feature `dynamic`: libleases.so from $LEASES_LIB_DIR, else the checkout's
//   build/, else pkg-config's `leases`;
// - feature `testing` (implies `dynamic`): the test library, build/test/.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LEASES_LIB_DIR");
    println!("cargo:rerun-if-env-changed=GO");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let lib_dir = env::var_os("LEASES_LIB_DIR").filter(|v| !v.is_empty()).map(|d| {
        // A relative LEASES_LIB_DIR is relative to this crate (cargo runs
        // build scripts there); make passes an absolute one.
        let d = manifest.join(d);
        d.canonicalize().unwrap_or(d)
    });
    let bundled = env::var_os("CARGO_FEATURE_BUNDLED").is_some();
    if env::var_os("CARGO_FEATURE_DYNAMIC").is_some() {
        if bundled {
            panic!(
                "libleases: the `bundled` feature builds the static archive, and `dynamic` links an installed \
                 libleases.so: enable one of them"
            );
        }
        link_shared(&manifest, lib_dir);
    } else if bundled {
        if let Some(dir) = lib_dir {
            println!(
                "cargo:warning=LEASES_LIB_DIR={} is ignored: the `bundled` feature builds libleases from its Go sources",
                dir.display()
            );
        }
        link_static_dir(&build_from_source(&manifest));
    } else {
        link_static(lib_dir);
    }
}

/// The Go sources: golib/ in a packaged crate, else the enclosing checkout.
fn go_sources(manifest: &Path) -> Option<PathBuf> {
    [manifest.join("golib"), manifest.join("..").join("..")]
        .into_iter()
        .find(|root| root.join("go.mod").is_file() && root.join("mk").join("golib.sh").is_file())
}

fn link_static(lib_dir: Option<PathBuf>) {
    let dir = match lib_dir {
        Some(dir) => {
            if !dir.join("libleases.a").is_file() {
                panic!(
                    "LEASES_LIB_DIR={} has no libleases.a (the static library this crate links by default): \
                     point it at a directory that has one (a `make install` prefix's lib/, or the checkout's \
                     build/ after `make build/libleases.a`), unset it to find an installed libleases with \
                     pkg-config, enable the `bundled` feature to build the library from source with Go, or \
                     enable the `dynamic` feature to link libleases.so",
                    dir.display()
                );
            }
            dir
        }
        None => match pkg_config_libdir("leases-static") {
            Some(dir) if dir.join("libleases.a").is_file() => dir,
            Some(dir) => panic!(
                "libleases: pkg-config's `leases-static` names {} as its libdir, which has no libleases.a",
                dir.display()
            ),
            None => panic!(
                "libleases not found: this crate links an installed libleases (libleases.a) and found none. \
                 Install it (in the libleases repository: `make install PREFIX=/opt/leases`) and let \
                 pkg-config find it (PKG_CONFIG_PATH=/opt/leases/lib/pkgconfig), or set LEASES_LIB_DIR to \
                 the directory holding libleases.a, or enable the crate's `bundled` feature to build the \
                 library from its Go sources (needs Go 1.26+ and a C compiler)"
            ),
        },
    };
    // The archive is linked into the program: a newer one installed over it
    // (an upgrade, a rebuilt checkout) must be linked by the next build,
    // which cargo does only when this script reruns. (Not for `bundled`:
    // that archive is this script's own output.)
    println!("cargo:rerun-if-changed={}", dir.join("libleases.a").display());
    link_static_dir(&dir);
}

fn link_static_dir(dir: &Path) {
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=leases");
    // The Go runtime's threads and cgo's DNS lookups (in libc from glibc 2.34 on).
    println!("cargo:rustc-link-lib=dylib=pthread");
    println!("cargo:rustc-link-lib=dylib=resolv");
    println!("cargo:lib_dir={}", dir.display());
}

fn build_from_source(manifest: &Path) -> PathBuf {
    let Some(root) = go_sources(manifest) else {
        panic!(
            "libleases: the `bundled` feature builds the library from its Go sources, and there are none \
             (neither {}/golib nor a libleases checkout around the crate): package the crate with \
             `make rust-crate`, or drop `bundled` to link an installed libleases",
            manifest.display()
        );
    };
    for watched in [
        "go.mod",
        "go.sum",
        "VERSION",
        "abi/VERSION",
        "include/leases.h",
        "mk/golib.sh",
        "leases.go",
        "capi",
        "core",
        "worker/loop",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let go = env::var("GO").unwrap_or_else(|_| "go".to_string());
    if Command::new(&go).arg("version").output().is_err() {
        panic!(
            "libleases: building the library from source needs Go 1.26 or later and a C compiler, and \
             `{go}` was not found. Install Go (or set GO to it), or drop the `bundled` feature to link an \
             installed libleases (found by pkg-config, or in LEASES_LIB_DIR)"
        );
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("golib");
    let status = Command::new("sh")
        .arg(root.join("mk").join("golib.sh"))
        .arg("static")
        .arg(out.join("libleases.a"))
        .env("GO", &go)
        .status()
        .expect("libleases: cannot run sh mk/golib.sh");
    if !status.success() {
        panic!("libleases: mk/golib.sh static failed ({status}); its output is above");
    }
    out
}

fn link_shared(manifest: &Path, lib_dir: Option<PathBuf>) {
    let testing = env::var_os("CARGO_FEATURE_TESTING").is_some();
    let checkout = manifest.join("..").join("..").join("build");
    let checkout = if testing { checkout.join("test") } else { checkout };
    let dir = lib_dir
        .or_else(|| Some(checkout.canonicalize().unwrap_or(checkout)).filter(|d| d.join("libleases.so").exists()))
        .or_else(|| if testing { None } else { pkg_config_libdir("leases") });
    let Some(dir) = dir else {
        panic!(
            "libleases.so not found: set LEASES_LIB_DIR to the directory holding it (the checkout's \
             build/, or build/test/ for the `testing` feature, after `make capi`; or a `make install` \
             prefix's lib/), or install libleases where pkg-config finds `leases`"
        );
    };
    if !dir.join("libleases.so").exists() {
        println!("cargo:warning=no libleases.so in {}; the link will fail", dir.display());
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=leases");
    // The rpath reaches this crate's own tests, examples and doc tests; cargo
    // passes it to no dependent (docs/rust.md), which reads DEP_LEASES_LIB_DIR.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
}

/// The libdir of an installed pkg-config package (`leases` or `leases-static`).
fn pkg_config_libdir(package: &str) -> Option<PathBuf> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(pkg_config).args(["--variable=libdir", package]).output().ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    let dir = dir.trim();
    (out.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}
