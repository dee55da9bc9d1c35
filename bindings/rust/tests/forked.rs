//! A fork()ed child gets `forked` at once instead of hanging in the Go
//! runtime. Its own test binary: fork() in a process with few threads.
#![cfg(target_os = "linux")]

mod common;

use std::ffi::CString;

use common::*;
use leases::{sys, ErrorKind};

extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(code: i32) -> !;
}

#[test]
fn a_forked_child_gets_the_forked_status_instead_of_hanging() {
    let (_dir, auth) = fresh("forked");
    let name = CString::new("from-child").unwrap();
    let worker = CString::new("w").unwrap();
    // SAFETY: the child only makes one library call (the C shim answers
    // without entering Go) and _exits; nothing is allocated after fork.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: live handle, valid string; see above.
        unsafe {
            let created = sys::leases_production_create(auth.as_raw(), name.as_ptr());
            // Forked is the first row of the rejection order: it wins over
            // an invalid duration.
            let mut out = std::ptr::null_mut();
            let claimed = sys::leases_claim(auth.as_raw(), name.as_ptr(), worker.as_ptr(), 0, &mut out);
            _exit(if created == claimed && out.is_null() { created } else { 100 })
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(status & 0x7f, 0, "the child exited normally");
    let code = (status >> 8) & 0xff;
    assert_eq!(ErrorKind::from_code(code), Some(ErrorKind::Forked), "child status {code}");
    // The parent is unaffected and nothing was written by the child.
    assert!(auth.jobs("from-child").is_err());
    auth.create_production("from-parent").unwrap();
}
