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

#[test]
fn collectives_are_exact_under_mpirun_including_empty_and_many_round_transfers() {
    let bin = Path::new(env!("CARGO_BIN_EXE_mfu-comm-check"));
    for np in [1, 2, 3, 4] {
        for round in ["1073741824", "64"] {
            let out = expect_status(mpirun(np, bin).env("MFU_MPI_ROUND_BYTES", round), 0);
            assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("ok on {np} ranks")));
        }
    }
}
