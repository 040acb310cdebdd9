//! The runtime under a real MPI launch.

use mfu_tests::{expect_status, mpirun};
use std::path::Path;

#[test]
fn work_stealing_is_exact_under_mpirun_np_2_and_4() {
    let bin = Path::new(env!("CARGO_BIN_EXE_mfu-queue-check"));
    for (np, seed) in [(2, 1), (4, 2), (4, 3)] {
        let out = expect_status(mpirun(np, bin).args(["20000", &seed.to_string()]), 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("ok 20000 on {np} ranks")), "{text}");
    }
}
