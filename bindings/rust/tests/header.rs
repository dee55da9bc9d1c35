//! The raw declarations in src/sys.rs match include/leases.h (and, for the
//! `testing` module, include/leases_testing.h): every function with the same
//! parameter and return types, every numeric #define with the same value,
//! and one ABI version everywhere. Both files are read at test time.

mod common;

use std::collections::BTreeMap;

use common::repo_root;

type Sigs = BTreeMap<String, (String, Vec<String>)>;

fn strip_c_comments(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("*/").expect("unterminated comment") + i + 2;
        out.push(' ');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

/// A C type as the Rust declaration must spell it, without spaces.
fn c_to_rust(ty: &str) -> String {
    let stars = ty.matches('*').count();
    let spaced = ty.replace('*', " ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let is_const = words.contains(&"const");
    let base: Vec<&str> = words.into_iter().filter(|w| *w != "const").collect();
    assert_eq!(base.len(), 1, "unexpected C type {ty:?}");
    let base = match base[0] {
        "char" => "c_char",
        "void" if stars > 0 => "c_void",
        "void" => return String::new(),
        "int" => "c_int",
        "int64_t" => "i64",
        "uint32_t" => "u32",
        "uint8_t" => "u8",
        "size_t" => "usize",
        other => other,
    };
    let mut t = base.to_string();
    for level in 0..stars {
        let q = if level == 0 && is_const { "*const" } else { "*mut" };
        t = format!("{q}{t}");
    }
    t
}

/// Splits "ret name" or "type name" where the name is the last identifier.
fn split_name(decl: &str) -> (String, String) {
    let decl = decl.trim();
    let cut = decl.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
    (decl[..cut].trim().to_string(), decl[cut..].to_string())
}

fn header_functions(file: &str) -> Sigs {
    let text = std::fs::read_to_string(repo_root().join("include").join(file)).unwrap();
    let code: String =
        strip_c_comments(&text).lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join(" ");
    let mut sigs = Sigs::new();
    for stmt in code.split(';') {
        let stmt = stmt.replace("extern \"C\" {", " ").replace('}', " ");
        let stmt = stmt.trim();
        if stmt.starts_with("typedef") || !stmt.contains('(') {
            continue;
        }
        let open = stmt.find('(').unwrap();
        let (ret, name) = split_name(&stmt[..open]);
        let params = stmt[open + 1..stmt.rfind(')').unwrap()].trim();
        let params: Vec<String> = if params == "void" {
            vec![]
        } else {
            params
                .split(',')
                .map(|p| {
                    let (ty, pname) = split_name(p);
                    // An unnamed parameter would leave the type's last word as the "name".
                    assert!(!ty.is_empty(), "{name}: unnamed parameter {p:?}");
                    assert!(!pname.is_empty(), "{name}: unnamed parameter {p:?}");
                    c_to_rust(&ty)
                })
                .collect()
        };
        sigs.insert(name, (c_to_rust(&ret), params));
    }
    assert!(!sigs.is_empty(), "no functions found in {file}");
    sigs
}

fn rust_functions() -> Sigs {
    let text = std::fs::read_to_string(repo_root().join("bindings/rust/src/sys.rs")).unwrap();
    let code: String = text.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join(" ");
    let mut sigs = Sigs::new();
    for part in code.split("pub fn ").skip(1) {
        let decl = &part[..part.find(';').unwrap()];
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let name = decl[..open].trim().to_string();
        let params: Vec<String> = decl[open + 1..close]
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| p.split_once(':').expect("name: type").1.split_whitespace().collect())
            .collect();
        let ret: String = decl[close + 1..].trim().trim_start_matches("->").split_whitespace().collect();
        sigs.insert(name, (ret, params));
    }
    sigs
}

fn header_defines(file: &str) -> BTreeMap<String, i128> {
    let text = std::fs::read_to_string(repo_root().join("include").join(file)).unwrap();
    strip_c_comments(&text)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "#define").then_some(())?;
            let name = w.next()?.to_string();
            let value: String = w.collect::<Vec<_>>().join("");
            let value = value.trim_start_matches("INT64_C(").trim_end_matches(')');
            Some((name, value.parse().ok()?))
        })
        .collect()
}

#[test]
fn every_header_function_is_declared_in_sys_with_the_same_signature() {
    let rust = rust_functions();
    let mut c = header_functions("leases.h");
    let testing = header_functions("leases_testing.h");
    assert!(c.len() >= 35, "parsed only {} functions", c.len());
    c.extend(testing);
    for (name, (ret, params)) in &c {
        let Some((rret, rparams)) = rust.get(name) else { panic!("{name} is declared in the header but not in sys") };
        assert_eq!(rparams.len(), params.len(), "{name}: parameter count");
        assert_eq!(rparams, params, "{name}: parameter types");
        assert_eq!(rret, ret, "{name}: return type");
    }
    for name in rust.keys() {
        assert!(c.contains_key(name), "sys declares {name}, which no header declares");
    }
}

#[test]
fn the_header_parser_sees_what_the_header_says() {
    // Guards the test above against a parser that silently reads nothing.
    let c = header_functions("leases.h");
    assert_eq!(c["leases_abi_version"], ("u32".into(), vec![]));
    assert_eq!(
        c["leases_job_request"],
        (
            "leases_status".into(),
            ["*mutleases_authority", "*constc_char", "*constc_char", "*constu8", "usize", "*mut*mutc_char"]
                .map(String::from)
                .to_vec()
        )
    );
    assert_eq!(c["leases_lease_expiry"].1, ["*constleases_lease", "*muti64"].map(String::from).to_vec());
    assert_eq!(c["leases_free"], (String::new(), vec!["*mutc_void".to_string()]));
}

#[test]
fn every_numeric_header_constant_has_the_same_value_in_sys() {
    let text = std::fs::read_to_string(repo_root().join("bindings/rust/src/sys.rs")).unwrap();
    let defines = header_defines("leases.h");
    assert!(defines.len() >= 27, "parsed only {} defines", defines.len());
    for (name, value) in &defines {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("pub const {name}:")))
            .unwrap_or_else(|| panic!("{name} is defined in the header but not in sys"));
        let rust: String = line.split('=').nth(1).unwrap().trim().trim_end_matches(';').replace('_', "");
        assert_eq!(rust.parse::<i128>().unwrap(), *value, "{name}");
    }
}

#[test]
fn the_crate_the_header_the_abi_file_and_the_library_agree_on_the_abi_version() {
    let header = header_defines("leases.h")["LEASES_ABI_VERSION"];
    let file: i128 = std::fs::read_to_string(repo_root().join("abi/VERSION")).unwrap().trim().parse().unwrap();
    let manifest = std::fs::read_to_string(repo_root().join("bindings/rust/Cargo.toml")).unwrap();
    let meta: i128 = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("abi-version = "))
        .expect("package.metadata.leases.abi-version")
        .parse()
        .unwrap();
    assert_eq!(header, file, "LEASES_ABI_VERSION vs abi/VERSION");
    assert_eq!(meta, header, "Cargo.toml package.metadata.leases.abi-version");
    assert_eq!(leases::ABI_VERSION as i128, header, "leases::ABI_VERSION");
    assert_eq!(leases::library_abi_version() as i128, header, "the loaded library");
}
