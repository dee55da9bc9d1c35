//! Tokens: the shared vectors (tests/vectors/tokens.json), export/import
//! round trips, and that a token never shows up where it should not.

mod common;

use common::*;
use leases::{ErrorKind, Facts, JobState};

#[test]
fn every_invalid_vector_token_is_rejected_as_a_bad_token() {
    let (_dir, auth) = fresh("tok-bad");
    let v = vectors("tokens.json");
    let invalid = v["invalid"].as_array().unwrap();
    assert!(!invalid.is_empty());
    for case in invalid {
        let token = case["token"].as_str().unwrap();
        let err = auth.import_token(token).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadToken, "{}: {err}", case["why"]);
        if token.len() > 8 {
            assert!(!err.to_string().contains(token), "the error echoes the token: {err}");
        }
    }
}

#[test]
fn every_valid_vector_token_decodes_and_is_then_checked_against_the_store() {
    // Well-formed tokens pass the decoder; their production is unknown in a
    // fresh authority, so the store check answers not_found (never bad_token).
    let (_dir, auth) = fresh("tok-ok");
    let v = vectors("tokens.json");
    for case in v["valid"].as_array().unwrap() {
        let token = case["token"].as_str().unwrap();
        assert!(token.len() <= leases::MAX_TOKEN_LEN);
        let err = auth.import_token(token).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{token}: {err}");
        let secret = case["secret_hex"].as_str().unwrap();
        assert!(!err.to_string().contains(token) && !err.to_string().contains(secret), "{err}");
    }
    assert_eq!(v["max_token_len"].as_u64().unwrap() as usize, leases::MAX_TOKEN_LEN);
}

#[test]
fn valid_vector_tokens_are_the_one_canonical_encoding_of_their_ids_and_secret() {
    for case in vectors("tokens.json")["valid"].as_array().unwrap() {
        let text = case["token"].as_str().unwrap();
        let production = token::uuid_bytes(case["production_id"].as_str().unwrap());
        let job = token::uuid_bytes(case["job_id"].as_str().unwrap());
        let secret: [u8; 16] = token::hex(case["secret_hex"].as_str().unwrap()).try_into().unwrap();
        assert_eq!(token::encode(production, job, secret), text);
        assert_eq!(token::decode(text), (production, job, secret));
    }
}

#[test]
fn an_exported_token_imports_as_the_same_active_lease() {
    let (_dir, auth) = fresh("tok-roundtrip");
    let (id, lease) = claimed(&auth, "w1");
    let token = lease.export_token().unwrap();
    assert!(token.as_str().starts_with("lt1.") && token.as_str().len() <= leases::MAX_TOKEN_LEN);
    drop(lease); // local memory only; the claim stays
    let again = auth.import_token(token.as_str()).unwrap();
    assert_eq!((again.job_id(), again.production(), again.worker()), (id.as_str(), PRODUCTION, "w1"));
    again.renew(HOUR).unwrap();
    again.complete(&Facts::new()).unwrap();
    assert_eq!(job_state(&auth, &id), JobState::Completed);
}

#[test]
fn a_token_of_a_finished_claim_imports_as_wrong_state() {
    let (_dir, auth) = fresh("tok-finished");
    let (_id, lease) = claimed(&auth, "w1");
    let token = lease.export_token().unwrap();
    lease.release().unwrap();
    assert_eq!(auth.import_token(token.as_str()).unwrap_err().kind(), ErrorKind::WrongState);
}

#[test]
fn a_token_with_a_nul_byte_is_a_bad_token() {
    let (_dir, auth) = fresh("tok-nul");
    let (_id, lease) = claimed(&auth, "w1");
    let mut text = lease.export_token().unwrap().as_str().to_string();
    text.insert(10, '\0');
    assert_eq!(auth.import_token(&text).unwrap_err().kind(), ErrorKind::BadToken);
}

#[test]
fn an_exported_token_works_from_another_authority_handle() {
    // The cross-process case within one process: a second handle to the file.
    let (dir, auth) = fresh("tok-other");
    let (id, lease) = claimed(&auth, "w1");
    let token = lease.export_token().unwrap();
    let other = leases::Authority::open(dir.db()).unwrap();
    let imported = other.import_token(token.as_str()).unwrap();
    assert_eq!(imported.job_id(), id);
    imported.fail("handed over").unwrap();
    assert_eq!(lease.renew(HOUR).unwrap_err().kind(), ErrorKind::WrongState, "the original handle hears it finished");
}
