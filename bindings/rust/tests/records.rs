//! One job's typed record (`Authority::job`,
//! `JobRecord::from_json`) with the facts its completion published, held
//! to the shared vector tests/vectors/facts.json: published from Rust and
//! read back, published from Rust and read by the CLI, published by the CLI
//! and read in Rust; on SQLite and PostgreSQL.

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Store, HOUR, PRODUCTION};
use leases::serde_json::Value;
use leases::{ErrorKind, Facts, JobRecord, JobState};

/// The facts of the vector, as a completion publishes them.
fn vector_facts(vector: &Value) -> Facts {
    let mut facts = Facts::new();
    for (k, v) in vector["metadata"].as_object().unwrap() {
        facts = facts.metadata(k.clone(), v.clone());
    }
    for (k, v) in vector["provenance"].as_object().unwrap() {
        facts = facts.provenance(k.clone(), v.clone());
    }
    facts
}

fn content(vector: &Value) -> Vec<u8> {
    vector["output"]["content"].as_str().unwrap().as_bytes().to_vec()
}

/// The vector's output directory, made in the store's scratch directory.
fn output_dir(s: &Store, vector: &Value) -> PathBuf {
    let dir = s.scratch.path().join(vector["output"]["dir"].as_str().unwrap());
    std::fs::create_dir(&dir).unwrap();
    dir
}

/// A record holds the vector's facts: metadata and provenance equal as JSON
/// values, the output's size and SHA-256 exact, its path the directory, the
/// job id and the nonce, and the file holds the content.
fn assert_reads_back_the_vector(record: &JobRecord, vector: &Value, dir: &Path) {
    assert_eq!(record.job.state, JobState::Completed);
    assert_eq!(Value::Object(record.facts.metadata.clone()), vector["metadata"]);
    assert_eq!(Value::Object(record.facts.provenance.clone()), vector["provenance"]);
    let [output] = record.facts.outputs.as_slice() else { panic!("one output: {:?}", record.facts.outputs) };
    let content = content(vector);
    assert_eq!((output.size, content.len() as u64), (vector["output"]["size"].as_u64().unwrap(), output.size));
    assert_eq!(output.sha256, vector["output"]["sha256"].as_str().unwrap());
    assert_eq!(output.path, PathBuf::from(format!("{}/{}.{}.out", dir.display(), record.job.id, output.nonce)));
    assert_eq!(std::fs::read(&output.path).unwrap(), content);
}

/// Publishes the vector from Rust through an execution; the job's id and the
/// output directory.
fn publish_from_rust(s: &Store, vector: &Value) -> (String, PathBuf) {
    let production = vector["production"].as_str().unwrap();
    s.auth.create_production(production).unwrap();
    let id = s.auth.request_job(production, None, b"").unwrap();
    let dir = output_dir(s, vector);
    let lease = s.auth.claim_job(production, &id, "rust", HOUR).unwrap();
    let mut run = lease.execution(&dir).unwrap();
    std::fs::write(run.temp_path(), content(vector)).unwrap();
    let final_path = run.final_path().to_owned();
    run.finish(&vector_facts(vector)).unwrap();
    assert_eq!(s.auth.job(production, &id).unwrap().facts.outputs[0].path, final_path);
    (id, dir)
}

/// Runs the release CLI (build/leases, which `make test-rust` builds first)
/// on the store; its standard output.
fn cli(s: &Store, args: &[&str]) -> String {
    let bin = common::repo_root().join("build").join("leases");
    assert!(bin.is_file(), "{} is missing: make build/leases", bin.display());
    let out = Command::new(&bin).arg("--db").arg(&s.location).args(args).output().unwrap();
    assert!(out.status.success(), "leases {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

on_both_stores!(
    the_shared_facts_vector_published_from_rust_reads_back_identically,
    facts_rust_published_read_back_identically_by_the_cli,
    facts_the_cli_published_read_back_identically_in_rust,
    a_record_before_completion_has_no_facts_and_its_times_and_size,
    a_record_of_another_production_or_a_bad_id_is_refused,
);

fn the_shared_facts_vector_published_from_rust_reads_back_identically(s: &Store) {
    let vector = common::vectors("facts.json");
    let (id, dir) = publish_from_rust(s, &vector);
    let record = s.auth.job(vector["production"].as_str().unwrap(), &id).unwrap();
    assert_reads_back_the_vector(&record, &vector, &dir);
    assert_eq!(record.history.len(), 1);
    assert_eq!(record.history[0].ending, leases::AttemptEnding::Completed);
}

fn facts_rust_published_read_back_identically_by_the_cli(s: &Store) {
    let vector = common::vectors("facts.json");
    let production = vector["production"].as_str().unwrap();
    let (id, dir) = publish_from_rust(s, &vector);
    let mine = s.auth.job(production, &id).unwrap();
    let theirs = JobRecord::from_json(&cli(s, &["job", "show", "--production", production, "--job", &id, "--json"]))
        .expect("the CLI prints leases_job_json's record");
    assert_eq!(theirs, mine);
    assert_reads_back_the_vector(&theirs, &vector, &dir);
}

fn facts_the_cli_published_read_back_identically_in_rust(s: &Store) {
    let vector = common::vectors("facts.json");
    let production = vector["production"].as_str().unwrap();
    cli(s, &["production", "create", production]);
    let id = cli(s, &["job", "request", "--production", production]).trim().to_owned();
    let token = s.scratch.path().join("job.token");
    let token = token.to_str().unwrap();
    cli(
        s,
        &[
            "claim",
            "--production",
            production,
            "--worker",
            "cli",
            "--duration",
            "5m",
            "--job",
            &id,
            "--token-out",
            token,
        ],
    );
    let dir = output_dir(s, &vector);
    let source = s.scratch.path().join("content");
    std::fs::write(&source, content(&vector)).unwrap();
    let mut args: Vec<String> =
        ["exec", "--token-file", token, "--output-dir", dir.to_str().unwrap()].map(String::from).into();
    for half in ["metadata", "provenance"] {
        args.extend(vector[half].as_object().unwrap().iter().map(|(k, v)| format!("--{half}={k}={v}")));
    }
    args.extend(["--", "sh", "-c", r#"cat "$1" > "$LEASES_OUTPUT""#, "sh", source.to_str().unwrap()].map(String::from));
    cli(s, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let record = s.auth.job(production, &id).unwrap();
    assert_eq!(record.job.worker.as_deref(), Some("cli"));
    assert_reads_back_the_vector(&record, &vector, &dir);
}

fn a_record_before_completion_has_no_facts_and_its_times_and_size(s: &Store) {
    let id = s.auth.request_job(PRODUCTION, Some("k"), b"seven b").unwrap();
    let record = s.auth.job(PRODUCTION, &id).unwrap();
    assert_eq!((record.job.id.as_str(), record.job.key.as_deref(), record.payload_size), (id.as_str(), Some("k"), 7));
    assert_eq!(record.facts, leases::PublishedFacts::default());
    assert!(record.history.is_empty());
    assert_eq!(record.updated_at, record.requested_at);
    assert_eq!(record.job.claimable_at, Some(record.requested_at));
    let lease = s.auth.claim_job(PRODUCTION, &id, "w", HOUR).unwrap();
    let token = lease.export_token().unwrap();
    let claimed = s.auth.job(PRODUCTION, &id).unwrap();
    lease.complete(&Facts::new().metadata("n", 1)).unwrap();
    let done = s.auth.job(PRODUCTION, &id).unwrap();
    assert!(done.updated_at >= record.updated_at);
    assert_eq!(done.facts.metadata.get("n"), Some(&Value::from(1)));
    assert!(done.facts.provenance.is_empty() && done.facts.outputs.is_empty());
    assert_eq!(done.history[0].worker, "w");
    // Neither the token nor the claim's secret (in hex, as the vectors
    // write it) is in a record, a listing or an event, whatever the verb.
    let secret: String = common::token::decode(token.as_str()).2.iter().map(|b| format!("{b:02x}")).collect();
    let events: Vec<leases::Event> = s.auth.iter_events(Some(PRODUCTION), 0).map(Result::unwrap).collect();
    let jobs: Vec<leases::Job> = s.auth.iter_jobs(PRODUCTION, &[]).map(Result::unwrap).collect();
    for text in [
        format!("{claimed:?} {done:?}"),
        format!("{claimed:#?} {events:?} {jobs:?}"),
        s.auth.job_json(PRODUCTION, &id).unwrap(),
    ] {
        assert!(!text.contains(token.as_str()) && !text.contains(&secret), "{text}");
        assert!(!text.contains(&token.as_str()[4..20]), "no part of the token: {text}");
    }
}

fn a_record_of_another_production_or_a_bad_id_is_refused(s: &Store) {
    let id = s.auth.request_job(PRODUCTION, None, b"").unwrap();
    s.auth.create_production("other").unwrap();
    assert_eq!(s.auth.job("other", &id).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(s.auth.job("missing", &id).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(s.auth.job(PRODUCTION, "not-an-id").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(s.auth.job(PRODUCTION, "a\0b").unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn a_record_that_is_not_the_documented_shape_is_an_internal_error() {
    for text in ["[]", "{}", r#"{"facts": {}}"#, "not json"] {
        assert_eq!(JobRecord::from_json(text).unwrap_err().kind(), ErrorKind::Internal, "{text}");
    }
}
